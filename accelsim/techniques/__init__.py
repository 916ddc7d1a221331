"""Training-acceleration techniques as plug-ins (``docs/architecture.md`` section 7).

The core never imports this package; :mod:`accelsim.driver` reaches the
techniques through :mod:`accelsim.techniques.registry`.
"""
