"""A mistake in a Python kernel is an `nki_rs.NkiError` subclass naming the instruction and
the kernel's own file and line; other Python exceptions pass through unchanged."""

import inspect

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nki_rs
from nki_rs import errors


def line_of(fn, text):
    """The file line of the first line of `fn` holding `text`."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, l in enumerate(lines) if text in l)


def raises(kind, kernel, *args):
    with pytest.raises(errors.NkiError) as info:
        nki_rs.simulate(kernel, *args)
    e = info.value
    assert type(e) is getattr(errors, kind + "Error"), f"{type(e).__name__}: {e}"
    assert e.kind == kind
    assert e.file == __file__
    return e


@nki.jit
def too_many_partitions(a):
    x = nl.ndarray((256, 4), dtype=a.dtype, buffer=nl.sbuf)  # over 128 partitions
    return x


def test_partition_limit_names_the_line():
    e = raises("PartitionLimit", too_many_partitions, np.zeros((4, 4), np.float32))
    assert e.line == line_of(too_many_partitions, "over 128 partitions")
    assert e.column == 9
    assert "256" in str(e) and f"{__file__}:{e.line}:9" in str(e)
    assert e.program_id == [0]


@nki.jit
def shapes_differ(a, b):
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=y, src=b)
    z = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)  # [128, 64] + [128, 32]
    return z


def test_mismatched_operands():
    e = raises("ShapeMismatch", shapes_differ, np.zeros((128, 64), np.float32), np.zeros((128, 32), np.float32))
    assert e.line == line_of(shapes_differ, "[128, 64] + [128, 32]")
    assert e.op == "nisa.tensor_tensor"


@nki.jit
def named_by_variables(a):
    acc = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    half = nl.zeros((128, 32), dtype=a.dtype, buffer=nl.sbuf, name="small")
    nisa.dma_copy(dst=acc, src=a)
    nisa.tensor_tensor(dst=half, data1=acc, data2=acc, op=nl.add)  # dst too small
    return half


def test_errors_name_tensors_after_the_kernels_variables():
    e = raises("ShapeMismatch", named_by_variables, np.zeros((128, 64), np.float32))
    assert e.line == line_of(named_by_variables, "dst too small")
    # `name=` wins over the variable; without it the tensor is its variable.
    assert "'small'" in str(e), str(e)
    x = nki_rs.simulate(nki.jit(_copy_named), np.ones((128, 8), np.float32))
    np.testing.assert_array_equal(x, np.ones((128, 8), np.float32))


def _copy_named(a):
    staged = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=staged, src=a)
    assert staged.name == "staged" and out.name == "out", (staged.name, out.name)
    nisa.dma_copy(dst=out, src=staged)
    return out


@nki.jit
def out_of_bounds(a):
    x = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a[128:256, :])  # a has 128 rows
    return x


def test_out_of_bounds_slice():
    e = raises("OutOfBounds", out_of_bounds, np.zeros((128, 64), np.float32))
    assert e.line == line_of(out_of_bounds, "a has 128 rows")


@nki.jit
def psum_to_hbm(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    p = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=p, src=x)
    nisa.dma_copy(dst=out, src=p)  # DMA cannot read PSUM
    return out


def test_wrong_memory():
    e = raises("WrongMemory", psum_to_hbm, np.zeros((128, 64), np.float32))
    assert e.line == line_of(psum_to_hbm, "DMA cannot read PSUM")


@nki.jit
def hbm_operand(a):
    z = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=z, src=a)  # a is in HBM
    return z


def test_hbm_tensor_where_an_engine_needs_sbuf():
    e = raises("WrongMemory", hbm_operand, np.zeros((128, 64), np.float32))
    assert e.line == line_of(hbm_operand, "a is in HBM")


@nki.jit
def reads_unwritten(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=x)  # x was never written
    return out


def test_uninitialized_read():
    e = raises("UninitializedRead", reads_unwritten, np.zeros((128, 64), np.float32))
    assert e.line == line_of(reads_unwritten, "never written")


@nki.jit
def races(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        x = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        nisa.dma_copy(dst=out, src=x)  # both iterations write all of out
    return out


def test_affine_range_iterations_writing_one_location():
    e = raises("OutputDependency", races, np.zeros((128, 64), np.float32))
    assert e.line == line_of(races, "both iterations write")


@nki.jit
def bad_operator(a):
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.tensor_tensor(dst=x, data1=x, data2=x, op=nl.exp)  # exp is no ALU operator
    return x


def test_an_argument_of_the_wrong_kind():
    e = raises("InvalidArgument", bad_operator, np.zeros((4, 4), np.float32))
    assert e.line == line_of(bad_operator, "no ALU operator")


@nki.jit
def returns_a_number(a):
    return 3


def test_a_kernel_returning_no_tensor():
    e = raises("InvalidArgument", returns_a_number, np.zeros((4, 4), np.float32))
    # The kernel's definition (its decorator line, where Python's code object starts).
    assert e.line == inspect.getsourcelines(returns_a_number.fn)[1]


@nki.jit
def python_error(a):
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    return x.no_such_attribute


def test_a_python_exception_of_the_kernel_passes_through():
    with pytest.raises(AttributeError):
        nki_rs.simulate(python_error, np.zeros((4, 4), np.float32))


@nki.jit
def swallows(a):
    try:
        nl.ndarray((256, 4), dtype=a.dtype, buffer=nl.sbuf)  # caught below
    except nki_rs.NkiError:
        pass
    return nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)


def test_a_failed_instruction_fails_the_launch_even_when_the_kernel_catches_it():
    e = raises("PartitionLimit", swallows, np.zeros((4, 4), np.float32))
    assert e.line == line_of(swallows, "caught below")


def test_a_call_outside_a_kernel():
    with pytest.raises(errors.OutsideKernelError):
        nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)


def test_every_error_kind_has_its_class():
    for kind in errors.KINDS:
        cls = getattr(errors, kind + "Error")
        assert issubclass(cls, nki_rs.NkiError) and cls.__name__ == kind + "Error"


def test_the_launch_is_usable_after_an_error():
    raises("PartitionLimit", too_many_partitions, np.zeros((4, 4), np.float32))
    a = np.ones((128, 64), np.float32)

    @nki.jit
    def fine(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        nisa.dma_copy(dst=out, src=x)
        return out

    np.testing.assert_array_equal(nki_rs.simulate(fine, a), a)


@nki.jit
def psum_over_the_banks(a):
    # A PSUM tensor may take several whole 2 KiB banks, not more than the 8 of a partition.
    p = nl.ndarray((128, 4608), dtype=nl.float32, buffer=nl.psum)  # 18 KiB per partition
    x = nl.ndarray((128, 4608), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.tensor_copy(dst=p, src=x)
    return p


def test_a_psum_tensor_over_its_banks():
    e = raises("PsumBankLimit", psum_over_the_banks, np.zeros((128, 4608), np.float32))
    assert e.line == line_of(psum_over_the_banks, "18 KiB per partition")


@nki.jit
def bf16_psum_dst(a, b):
    s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    m = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a)
    nisa.dma_copy(dst=m, src=b)
    p = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=s, moving=m)  # a bf16 dst needs trn3
    return p


def test_a_dtype_the_target_does_not_take():
    e = raises("DType", bf16_psum_dst, np.zeros((128, 128), np.float32), np.zeros((128, 512), np.float32))
    assert e.line == line_of(bf16_psum_dst, "a bf16 dst needs trn3")


@nki.jit
def contraction_differs(a, b):
    s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    m = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a)
    nisa.dma_copy(dst=m, src=b)
    p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=s, moving=m)  # K 128 against K 64
    return p


def test_a_matmul_whose_contraction_differs():
    e = raises("ContractionMismatch", contraction_differs, np.zeros((128, 128), np.float32), np.zeros((64, 512), np.float32))
    assert e.line == line_of(contraction_differs, "K 128 against K 64")


@nki.jit
def writes_its_input(a):
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=a, src=x)  # a is an input
    return x


def test_a_store_into_a_kernel_input():
    e = raises("ImmutableInput", writes_its_input, np.zeros((128, 64), np.float32))
    assert e.line == line_of(writes_its_input, "a is an input")


@nki.jit
def psum_tiles_over_the_banks(a):
    tiles = []
    for i in range(9):
        tiles.append(nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum))  # one 2 KiB bank each
    return tiles[0]


def test_more_live_psum_tiles_than_banks():
    e = raises("Capacity", psum_tiles_over_the_banks, np.zeros((4, 4), np.float32))
    assert e.line == line_of(psum_tiles_over_the_banks, "one 2 KiB bank each")
