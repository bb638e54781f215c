#!/usr/bin/python3
"""What each NVML call of cohort's GPU checks costs on this machine, in a fresh process.

Loads libnvidia-ml.so.1 through ctypes and times, in the order the health gate and
`cohort doctor` make them: nvmlInit_v2, the device count, then per device its handle, PCI info,
running compute processes, uncorrectable ECC errors, ECC mode (doctor only) and remapped rows.
Then asks each device's ECC errors 8 times in a row, to show what a later reading (a restart's)
pays. Run it a few times: each run is a new process, as each launch is.

Usage: bench/nvml_calls.py [--runs 3]   (a GPU node; prints one line per run)
COHORT_NVML_LIBRARY names another library, as for cohort (the test double, to try it anywhere).
"""
import argparse
import ctypes
import os
import subprocess
import sys
import time


class PciInfo(ctypes.Structure):  # nvmlPciInfo_t
    _fields_ = [("bus_id_legacy", ctypes.c_char * 16), ("ids", ctypes.c_uint * 5),
                ("bus_id", ctypes.c_char * 32)]


class ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_t
    _fields_ = [("pid", ctypes.c_uint), ("used_gpu_memory", ctypes.c_ulonglong),
                ("gpu_instance_id", ctypes.c_uint), ("compute_instance_id", ctypes.c_uint)]


def timed(calls, name, fn):
    begun = time.perf_counter()
    fn()
    calls.append(f"{name} {1e3 * (time.perf_counter() - begun):.2f}")


def one_run():
    calls = []
    nvml = None

    def load():
        nonlocal nvml
        library = os.environ.get("COHORT_NVML_LIBRARY") or "libnvidia-ml.so.1"
        try:
            nvml = ctypes.CDLL(library)
        except OSError as error:
            sys.exit(f"nvml_calls: cannot load {library} ({error}): run it on a GPU node")

    timed(calls, "dlopen", load)
    timed(calls, "init", nvml.nvmlInit_v2)
    count = ctypes.c_uint()
    timed(calls, "count", lambda: nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)))
    for index in range(count.value):
        device = ctypes.c_void_p()
        word = ctypes.c_uint()
        errors = ctypes.c_ulonglong()
        current, pending = ctypes.c_int(), ctypes.c_int()
        rows = [ctypes.c_uint() for _ in range(4)]
        processes = (ProcessInfo * 16)()
        timed(calls, f"gpu{index} handle",
              lambda: nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(device)))
        timed(calls, "pci", lambda: nvml.nvmlDeviceGetPciInfo_v3(device, ctypes.byref(PciInfo())))
        word.value = 16
        timed(calls, "processes", lambda: nvml.nvmlDeviceGetComputeRunningProcesses_v3(
            device, ctypes.byref(word), processes))
        ecc = lambda: nvml.nvmlDeviceGetTotalEccErrors(device, 1, 0, ctypes.byref(errors))  # noqa: E731
        timed(calls, "ecc errors", ecc)
        timed(calls, "ecc mode", lambda: nvml.nvmlDeviceGetEccMode(
            device, ctypes.byref(current), ctypes.byref(pending)))
        timed(calls, "remapped rows", lambda: nvml.nvmlDeviceGetRemappedRows(
            device, *[ctypes.byref(row) for row in rows]))
        timed(calls, "ecc errors x8 again", lambda: [ecc() for _ in range(8)])
    print("ms: " + "; ".join(calls))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a run's own process
    args = parser.parse_args()
    if args.one:
        return one_run()
    for _ in range(args.runs):
        if subprocess.run([sys.executable, __file__, "--one"]).returncode != 0:
            sys.exit(1)


if __name__ == "__main__":
    main()
