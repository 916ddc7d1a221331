"""ADA-GP, adaptive gradient prediction (Janfaza et al., MICRO 2023): a plug-in in
:mod:`accelsim.techniques.prediction.technique`."""
