"""The planner: which pairs fit on a card and how well they share, predicted before running them.

``profiles`` reads solo workload profiles, ``measured`` the measured pairs of any results folders,
``model`` is the physical base model from solo profiles, ``fit`` the correction learned from
measured pairs with leave-one-out intervals, ``memory`` the fit on a card, and ``predict`` puts
them together for every pair of a selection. Nothing here imports torch or opens a device.
"""
