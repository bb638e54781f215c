"""Makes a PyTorch built without libuv (Debian 13's python3-torch 2.6) usable as shipped.

PyTorch 2.4+ defaults every torch.distributed.TCPStore, server or client, to use_libuv=True, and a
build without libuv refuses that ("use_libuv was requested but PyTorch was build without libuv
support"). USE_LIBUV=0 reaches only some of the places that make stores: torchrun's own c10d
rendezvous store, its shared worker store, and a worker's store in agent-store mode
(TORCHELASTIC_USE_AGENT_STORE=True, what torchrun 2.6 and cohort give their workers) still ask for
libuv, so torchrun and init_process_group("env://") under either launcher fail.

This module replaces torch.distributed.TCPStore, once torch.distributed is imported, by a subclass
that falls back to the backend the build has (use_libuv=False) when the requested one is missing,
and points every already-imported torch.distributed module that holds the class (rendezvous.py,
which _create_c10d_store reads it from) at the subclass. Nothing changes on a build with libuv.
Importing this module only installs an import hook: torch is not imported until the program does.
COHORT_TORCH_NO_LIBUV=0 in the environment leaves PyTorch as shipped (the tests use it to show
what happens without the hook).

Installed by scripts/setup into the PyTorch 2.6 root of the torch2 test tier, as
cohort_torch_no_libuv.py plus cohort-torch-no-libuv.pth (the line `import cohort_torch_no_libuv`)
in a site-packages directory, so that every Python process there loads it (README: "PyTorch 2.6
from Debian 13").
"""
import importlib.abc
import os
import sys

_TARGET = "torch.distributed"
_MISSING = "without libuv support"


def _patch(dist):
    original = getattr(dist, "TCPStore", None)
    if original is None or getattr(original, "_cohort_no_libuv", False):
        return

    class TCPStore(original):
        _cohort_no_libuv = True

        def __init__(self, *args, **kwargs):
            try:
                super().__init__(*args, **kwargs)
            except RuntimeError as error:
                # use_libuv is the 9th parameter; given positionally it is the caller's choice.
                if _MISSING not in str(error) or len(args) >= 9:
                    raise
                kwargs["use_libuv"] = False
                super().__init__(*args, **kwargs)

    TCPStore.__name__ = TCPStore.__qualname__ = original.__name__
    TCPStore.__module__ = original.__module__
    TCPStore.__doc__ = original.__doc__
    for name, module in list(sys.modules.items()):
        if (name == _TARGET or name.startswith(_TARGET + ".")) and \
                getattr(module, "TCPStore", None) is original:
            module.TCPStore = TCPStore


class _Loader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name):  # get_resource_reader, is_package, ... of the real loader
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


if os.environ.get("COHORT_TORCH_NO_LIBUV") == "0":
    pass
elif _TARGET in sys.modules:
    _patch(sys.modules[_TARGET])
elif not any(isinstance(finder, _Finder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
