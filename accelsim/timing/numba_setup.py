"""Numba for accelsim's compiled code, loaded without probing SciPy's BLAS.

The first jitted call of a process, compiled or loaded from the cache,
initialises Numba's CPU target, which imports Numba's NumPy support; its array
math module probes for a BLAS once, at import, by importing
``scipy.linalg.cython_blas``, and so SciPy's linear algebra (about 0.2 s,
a third of what loading Numba and the cached event loop costs, when SciPy is
installed).  Nothing accelsim compiles uses a BLAS, so :func:`njit` imports
that module first with the probe's import blocked (a ``None`` entry in
``sys.modules``, which makes that import fail without loading anything) and
removes the block at once.  The probe's answer only picks, for ``np.convolve``
and ``np.correlate`` on floats compiled later in the process, Numba's own inner
product instead of BLAS's; ``np.dot`` and ``np.linalg`` check for a BLAS again
when they are compiled and find SciPy's as usual.  Nothing changes when the
probe already ran or SciPy's BLAS is already imported.

The event loop (:mod:`accelsim.timing.event_loop`) and the kernels
(:mod:`accelsim.timing.kernels`) take :func:`njit` from here.

**A cache that covers every source it is compiled from** (:func:`cached`).  Numba's
``cache=True`` keys a function's cached machine code by its own source file (a hash
of its content): a function it inlines from another module, edited there, would
leave the stale code in the cache.  The event loop is compiled from several modules
(its helpers, the memory models' kernels), so it is compiled with :func:`cached`,
whose cache is Numba's own (same files, same places: beside the module,
``NUMBA_CACHE_DIR`` or the user's cache directory) but keyed by the content of every
file in :func:`compiled_from`: the function's own, and recursively those of the
jitted functions it calls and of the modules of its own package it reads constants
from.  Jitted code in that set therefore calls other jitted functions by name and
reads another module's constants as attributes of that module (``flat.KIND_UNIT``),
never as names imported from it, which :func:`compiled_from` cannot trace
(``tests/timing/test_numba_setup.py`` checks the event loop keeps to that).  The cache
classes come from ``numba.core.caching`` (Numba 0.68), whose locators are used as
they are, with the source stamp replaced.

**Indices without wraparound** (``cached(wraparound=False)``).  Numba indexes an
array as Python does: a negative integer index counts from the end, so every index
whose sign LLVM cannot prove is compared and corrected before its load.  Numba has
no option to leave that out; a function whose indices are never negative (the event
loop's: ops, units, memories, events, slots) is compiled with Numba's
``numba.np.arrayobj.fix_integer_index`` replaced, while it compiles (under Numba's
compiler lock, so no other compilation sees it), by one that takes the index as it
is.  Everything that compilation compiles is compiled so (the helpers compiled into
it among them, unless the process compiled them before), and so is its cached code.
A negative index in such a function reads outside its array, as an index past the
end already does (Numba checks no bounds).  The replacement is made only where the
function has the parameters it had from Numba 0.59 to 0.68
(:func:`replaceable_fix`); a Numba that renamed or reshaped it compiles the loop with
the wraparound, slower and with the same results.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from numba import njit
from numba.core import caching
from numba.core import types as numba_types
from numba.core.compiler_lock import global_compiler_lock
from numba.core.dispatcher import Dispatcher
from numba.cpython.unsafe.numbers import leading_zeros as _leading_zeros
from numba.cpython.unsafe.numbers import trailing_zeros as _trailing_zeros

__all__ = [
    "cached", "compiled_from", "inline", "leading_zeros", "literal", "njit", "trailing_zeros",
]  # fmt: skip

# The count of an integer's leading and trailing zero bits (LLVM's ``ctlz`` and
# ``cttz``), for compiled code only.
leading_zeros: Callable[[int], int] = _leading_zeros  # type: ignore[assignment]
trailing_zeros: Callable[[int], int] = _trailing_zeros  # type: ignore[assignment]

F = TypeVar("F", bound=Callable[..., Any])

BLAS_PROBE = "scipy.linalg.cython_blas"


def _import_array_math_unprobed() -> None:
    """Import Numba's array math with the BLAS probe's import blocked."""
    if "numba.np.arraymath" in sys.modules or BLAS_PROBE in sys.modules:
        return
    sys.modules[BLAS_PROBE] = None  # type: ignore[assignment]
    try:
        import numba.np.arraymath  # noqa: F401  (the probe runs here, once)
    except ImportError:  # a Numba laid out otherwise: it loads as it would without this
        pass
    finally:
        if sys.modules.get(BLAS_PROBE, ()) is None:
            del sys.modules[BLAS_PROBE]


_import_array_math_unprobed()


# ``_nrt`` is Numba's switch for its reference counting (``NRT``); it is not in
# Numba's type stubs, hence the dictionary.
_INLINE_OPTIONS: dict[str, Any] = {"forceinline": True, "_nrt": False, "error_model": "numpy"}


def inline(function: F) -> F:
    """``njit`` for a helper of a :func:`cached` function: compiled into its caller
    (``forceinline``: LLVM inlines every call), without Numba's reference counting
    (``_nrt=False``: a helper only indexes its caller's arrays, never allocates or
    keeps one; with counting, every call paid atomic operations on each array
    argument), under NumPy's error model (no zero-divisor check on an integer
    division) and never cached on its own: its caller's cache covers its source
    (:func:`compiled_from`), while a cache of its own, keyed by its file alone,
    would hand a caller compiled again a stale copy of what it inlines."""
    compiled: F = njit(**_INLINE_OPTIONS)(function)
    return compiled


def literal(value: int) -> Any:
    """Numba's type of the integer ``value`` as a literal: an argument whose
    ``_numba_type_`` it is (Numba's ``typeof`` reads that attribute) has the function
    compiled for that value, a constant in its code."""
    return numba_types.literal(value)  # type: ignore[no-untyped-call]


def _names(code: types.CodeType) -> Iterator[str]:
    """The global names ``code`` and the code objects nested in it read."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


def compiled_from(function: Callable[..., Any]) -> tuple[Path, ...]:
    """The source files ``function`` is compiled from: its own, each jitted function
    it reads by name (recursively), and each module of its own top-level package it
    reads as a global (with every jitted function that module defines), sorted."""
    package = function.__module__.split(".")[0]
    files: set[str] = set()
    seen: set[types.CodeType] = set()
    pending: list[Callable[..., Any]] = [function]
    while pending:
        current = pending.pop()
        if current.__code__ in seen:
            continue
        seen.add(current.__code__)
        files.add(current.__code__.co_filename)
        namespace = current.__globals__
        for name in _names(current.__code__):
            value = namespace.get(name)
            if isinstance(value, Dispatcher):
                pending.append(value.py_func)
            elif isinstance(value, types.ModuleType) and value.__name__.split(".")[0] == package:
                if getattr(value, "__file__", None):
                    files.add(str(value.__file__))
                pending.extend(v.py_func for v in vars(value).values() if isinstance(v, Dispatcher))
    return tuple(sorted(Path(f) for f in files))


def _sources_stamp(files: tuple[Path, ...]) -> str:
    """A digest of the names and contents of ``files``."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class _CoversSources:
    """A locator mixin whose source stamp covers :func:`compiled_from`'s files."""

    _stamp = ""

    def get_source_stamp(self) -> str:
        return self._stamp

    @classmethod
    def from_function(cls, py_func: Callable[..., Any], py_file: str) -> Any:
        locator = super().from_function(py_func, py_file)  # type: ignore[misc]
        if locator is not None:
            locator._stamp = _sources_stamp(compiled_from(py_func))
        return locator


class _SourcesCacheImpl(caching.CompileResultCacheImpl):
    """Numba's cache of compile results, its locators covering every source."""

    _locator_classes: list[type[object]] = [  # noqa: RUF012 (Numba's own attribute)
        type(f"Covering{base.__name__}", (_CoversSources, base), {})
        for base in (
            caching.UserProvidedCacheLocator,
            caching.InTreeCacheLocator,
            caching.UserWideCacheLocator,
        )
    ]


class _SourcesCache(caching.FunctionCache):
    """Numba's function cache, keyed by every source (:func:`compiled_from`)."""

    _impl_class = _SourcesCacheImpl


def _index_as_is(context: Any, builder: Any, index_type: Any, index: Any, _: Any) -> Any:
    """``numba.np.arrayobj.fix_integer_index`` without the wraparound of a negative
    index: the index as an ``intp`` (``uintp`` when unsigned)."""
    as_is = numba_types.intp if index_type.signed else numba_types.uintp
    return context.cast(builder, index, index_type, as_is)


FIX_PARAMETERS = ("context", "builder", "idxty", "idx", "size")
"""The parameters of the ``numba.np.arrayobj.fix_integer_index`` that
:func:`_index_as_is` stands in for (Numba 0.59 to 0.68)."""


def replaceable_fix(arrayobj: Any) -> Any:
    """``arrayobj.fix_integer_index`` when it is the function :func:`_index_as_is` can
    stand in for (by its parameters), else None: a Numba that renamed or reshaped it
    compiles with the wraparound (slower, never wrong)."""
    fix = getattr(arrayobj, "fix_integer_index", None)
    if fix is None:
        return None
    try:
        parameters = tuple(inspect.signature(fix).parameters)
    except (TypeError, ValueError):
        return None
    return fix if parameters == FIX_PARAMETERS else None


@contextlib.contextmanager
def _no_wraparound() -> Iterator[None]:
    """Inside the block (which holds Numba's compiler lock), arrays are indexed without
    the wraparound of negative indices, where this Numba lets :func:`replaceable_fix`
    replace its index fix; with the wraparound otherwise."""
    from numba.np import arrayobj  # Numba's array lowering: loaded when it compiles

    with global_compiler_lock:
        fix = replaceable_fix(arrayobj)
        if fix is None:
            yield
            return
        arrayobj.fix_integer_index = _index_as_is
        try:
            yield
        finally:
            arrayobj.fix_integer_index = fix


def cached(*, wraparound: bool = True, **options: Any) -> Callable[[F], F]:
    """``njit(**options)``, its machine code cached on disk keyed by every file of
    :func:`compiled_from` (see the module docstring); without ``wraparound``, compiled
    with its arrays' integer indices taken as they are (see the module docstring)."""

    def compile_cached(function: F) -> F:
        dispatcher = njit(**options)(function)
        # Without a writable place for a cache, it is compiled in every process.
        with contextlib.suppress(RuntimeError):
            dispatcher._cache = _SourcesCache(dispatcher.py_func)  # type: ignore[no-untyped-call]
        if not wraparound:
            compile_signature = dispatcher.compile

            def compile_as_is(signature: Any) -> Any:
                with _no_wraparound():
                    return compile_signature(signature)

            dispatcher.compile = compile_as_is
        compiled: F = dispatcher
        return compiled

    return compile_cached
