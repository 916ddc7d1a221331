"""Training-acceleration techniques as plug-ins (``DESIGN.md`` section 6).

The core never imports this package; :mod:`accelsim.driver` reaches the
techniques through :mod:`accelsim.techniques.registry`.
"""
