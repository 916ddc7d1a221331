"""Pipeline-parallel training schedules as plug-ins: GPipe, PipeDream and LayerPipe."""
