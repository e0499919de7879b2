"""Scripts that produce the reference results under reports/reference/<study>/, one folder per study."""
