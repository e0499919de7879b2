"""A CUDA client without torch, for the MPS readiness check: creates a context on device 0 through
the driver API (which connects to the MPS daemon named in its environment), says "ok", and holds
the context until its stdin closes. Run as ``python -m pytest_gpu_pairs.workloads.mps_client``."""
import ctypes
import sys


def main() -> int:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        sys.exit(f"cannot load the CUDA driver: {exc}")
    device, context = ctypes.c_int(), ctypes.c_void_p()
    steps = (("cuInit", lambda: cuda.cuInit(0)), ("cuDeviceGet", lambda: cuda.cuDeviceGet(ctypes.byref(device), 0)),
             ("cuCtxCreate", lambda: cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device)))
    for name, call in steps:
        result = call()
        if result != 0:
            sys.exit(f"{name} failed with CUresult {result}")
    print("ok", flush=True)
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
