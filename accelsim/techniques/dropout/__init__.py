"""Approximate random dropout (Song et al.): a plug-in in
:mod:`accelsim.techniques.dropout.technique`."""
