"""Configuration: validated, frozen specs of hardware, energy tables and runs."""
