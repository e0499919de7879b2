"""What this machine's NVML offers: the capabilities the monitors rely on, as JSON."""
import json
import shutil
import subprocess
import sys
import time

import pynvml as n

n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(0)
report = {"name": n.nvmlDeviceGetName(h), "driver": n.nvmlSystemGetDriverVersion(),
          "cuda": n.nvmlSystemGetCudaDriverVersion(), "mem_total_mb": n.nvmlDeviceGetMemoryInfo(h).total / 2**20}


def attempt(name, fn):
    try:
        value = fn()
        report[name] = value if isinstance(value, (int, float, str, list, dict, type(None))) else repr(value)
    except Exception as exc:
        report[name] = f"ERROR {type(exc).__name__}: {exc}"


attempt("energy_mj", lambda: n.nvmlDeviceGetTotalEnergyConsumption(h))
attempt("power_usage_mw", lambda: n.nvmlDeviceGetPowerUsage(h))
attempt("power_limit_mw", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h))
attempt("field_power", lambda: [(v.nvmlReturn, v.value.uiVal) for v in
                                n.nvmlDeviceGetFieldValues(h, [n.NVML_FI_DEV_POWER_INSTANT, n.NVML_FI_DEV_POWER_AVERAGE])])
attempt("compute_mode", lambda: n.nvmlDeviceGetComputeMode(h))
attempt("mps_control", lambda: shutil.which("nvidia-cuda-mps-control"))
attempt("persistence", lambda: n.nvmlDeviceGetPersistenceMode(h))
load = subprocess.Popen([sys.executable, "-c",
                         "import torch,time;a=torch.randn(4096,4096,device='cuda');t=time.time()\n"
                         "while time.time()-t<4: a=a@a; a=a/a.norm()\n"
                         "torch.cuda.synchronize()"])
time.sleep(2.5)
attempt("procs", lambda: [(p.pid, p.usedGpuMemory) for p in n.nvmlDeviceGetComputeRunningProcesses(h)])
attempt("proc_util", lambda: [(s.pid, s.smUtil, s.timeStamp) for s in
                              n.nvmlDeviceGetProcessUtilization(h, int((time.time() - 1) * 1e6))])
attempt("util", lambda: n.nvmlDeviceGetUtilizationRates(h).gpu)
attempt("loaded_pid", lambda: load.pid)
load.wait()
print(json.dumps(report, indent=1, default=str))
