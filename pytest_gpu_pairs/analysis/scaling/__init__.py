"""How one data-parallel job scales: the scaling cases read back, a model fitted to them, and the decision to move a job to more GPUs."""
