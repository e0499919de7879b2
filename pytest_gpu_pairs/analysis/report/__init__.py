"""Reports: inputs -> one table of runs (load; the predecessor's CSV through compat) -> analysis -> plots -> HTML.

Nothing here is imported by the pytest plugin's import path: pandas, scipy and matplotlib load
only when a report is built (``gpu-pairs report``, ``build.build_report``).
"""
