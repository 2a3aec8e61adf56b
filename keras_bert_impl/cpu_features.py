"""What the CPU offers the speed of int8 and bf16 inference: its model name and the extensions
that decide it (AVX2, AVX-512, VNNI, BF16, AMX), read from /proc/cpuinfo.

int8's gain over float32 differs several-fold between CPU kinds (docs/export.md, "Quantization"),
so every latency this project prints names the CPU it was measured on. Plain Python: nothing here
imports TensorFlow.
"""

CPUINFO = "/proc/cpuinfo"

# Each extension, in the order they are printed, with the /proc/cpuinfo flags (Linux's names,
# arch/x86/include/asm/cpufeatures.h) any one of which gives it: VNNI is AVX-512's or the
# 256-bit AVX-VNNI of later cores; BF16 is AVX-512's or AMX's.
EXTENSIONS = (
    ("AVX2", ("avx2",)),
    ("AVX-512", ("avx512f",)),
    ("VNNI", ("avx512_vnni", "avx_vnni")),
    ("BF16", ("avx512_bf16", "amx_bf16")),
    ("AMX", ("amx_tile",)),
)


class CpuFeatures:
    """A CPU's model name and flags (`of_this_machine()` reads them; the constructor takes them,
    e.g. from a results file or a test's table).

    Args:
        model: the model name (`model name` in /proc/cpuinfo), or None where it is unknown.
        flags: the CPU's flags (`flags`, or `Features` on ARM), lower case.
    """

    def __init__(self, model, flags):
        if model is not None and not isinstance(model, str):
            raise TypeError(f"model must be a string or None. Received: model={model!r}")
        if isinstance(flags, str) or not all(isinstance(f, str) for f in flags):
            raise TypeError(
                f"flags must be a list of flag names, e.g. ['avx2', 'fma']. Received: flags={flags!r}"
            )
        self.model = model
        self.flags = frozenset(flags)

    @classmethod
    def of_this_machine(cls, cpuinfo=CPUINFO):
        """The first processor's model name and flags in `cpuinfo`; (None, no flags) where the
        file cannot be read (macOS, Windows), which `describe` says."""
        model, flags = None, []
        try:
            with open(cpuinfo, encoding="utf-8", errors="replace") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    key = key.strip()
                    if model is None and key == "model name":
                        model = value.strip()
                    elif not flags and key in ("flags", "Features"):
                        flags = value.split()
        except OSError:
            return cls(None, [])
        return cls(model, flags)

    def has(self, extension):
        """Whether the CPU has `extension`, one of the names of EXTENSIONS."""
        for name, flags in EXTENSIONS:
            if name == extension:
                return any(f in self.flags for f in flags)
        raise ValueError(
            f"extension must be one of {[n for n, _ in EXTENSIONS]}. Received: extension={extension!r}"
        )

    @property
    def extensions(self):
        """The names of EXTENSIONS the CPU has, in their order."""
        return [name for name, _ in EXTENSIONS if self.has(name)]

    def describe(self):
        """One line: the model and which extensions it has and lacks, e.g.
        "AMD EPYC 7B13 (AVX2; no AVX-512, VNNI, BF16 or AMX)"."""
        if self.model is None and not self.flags:
            return "an unknown CPU (no /proc/cpuinfo to read)"
        have = self.extensions
        lack = [name for name, _ in EXTENSIONS if name not in have]
        parts = []
        if have:
            parts.append(", ".join(have))
        if lack:
            parts.append("no " + (", ".join(lack[:-1]) + " or " + lack[-1] if len(lack) > 1 else lack[0]))
        return f"{self.model or 'a CPU of unknown model'} ({'; '.join(parts)})"

    def to_dict(self):
        """{"model", "extensions", "flags"}: what a results file or report records."""
        return {"model": self.model, "extensions": self.extensions, "flags": sorted(self.flags)}

    @classmethod
    def from_dict(cls, record):
        return cls(record["model"], record["flags"])
