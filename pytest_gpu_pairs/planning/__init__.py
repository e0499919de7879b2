"""Before running: what a selection will cost, whether its pairs fit and how well they share, on how many GPUs.

``estimate`` gives each case's seconds and what they rest on, ``schedule`` places cases on GPUs
or shards by those seconds, ``profiles`` reads the one workload-profile table (the package's H100
profiles, or a file of the user's card), ``measured`` the measured pairs of results folders,
``model`` is the physical base model of a pair, ``fit`` the correction learned from measured
pairs with intervals calibrated on held-out workloads, ``memory`` the fit on a card, ``predict``
puts them together for every pair of a selection, ``plan`` is ``gpu-pairs plan``, and ``validate``
(``gpu-pairs plan-validate``) predicts the measured pairs blind to each of their workloads. This
wing sits below the plugin and above the run layer and the analysis of stored records; nothing
here imports torch or opens a device.
"""
