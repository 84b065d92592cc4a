"""The exceptions of nki_rs: one ``NkiError`` subclass per kind of mistake nki-core reports.

Each carries ``kind``, ``op``, ``message``, ``program_id`` and the kernel's own ``file``,
``line`` and ``column``.
"""


class NkiError(Exception):
    """A kernel mistake (or failure) reported by nki-core."""

    def __init__(self, text, kind="NkiError", op=None, message=None, program_id=None,
                 file=None, line=None, column=None):
        super().__init__(text)
        self.kind = kind
        self.op = op
        self.message = message if message is not None else text
        self.program_id = program_id
        self.file = file
        self.line = line
        self.column = column


# nki-core's ErrorKind variants; each is raised as ``<Kind>Error``.
KINDS = (
    "PartitionLimit", "PsumBankLimit", "MatmulLimit", "ShapeMismatch", "PartitionMismatch",
    "ContractionMismatch", "OutOfBounds", "PartitionOffset", "PartitionReduction",
    "WrongMemory", "DType", "ImmutableInput", "OutputDependency", "UninitializedRead",
    "Capacity", "InvalidGrid", "InvalidArgument", "OutsideKernel", "NoData", "KernelPanic",
    "OutputNotWritten", "NestedLaunch", "Io", "Deadlock", "Synchronization", "InvalidDevice",
    "HostMemory", "AddressOverlap",
)

for _kind in KINDS:
    globals()[_kind + "Error"] = type(_kind + "Error", (NkiError,), {
        "__doc__": "An nki-core error of kind " + _kind + ".",
        "__module__": __name__,
    })

__all__ = ["NkiError", "KINDS"] + [k + "Error" for k in KINDS]
