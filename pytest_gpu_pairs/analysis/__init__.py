"""What recorded runs say: comparisons, the sharing report, dead time, reports."""
