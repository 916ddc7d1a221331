"""Reports: typed results, CSV/JSON files, console tables and plots."""
