"""CODA-rs on PyTorch tensors.

The programs compiled into this package (the Llama block's and LM-head
tail's fused GEMM epilogues, see ``programs()``) run on ``torch`` CUDA
tensors, without copies (DLPack), on ``torch.cuda.current_stream()``. Every
argument is checked before anything is launched; a broken rule raises
``ArgumentError`` (a ``ValueError``) whose ``argument`` attribute names the
argument. Outputs not passed in are allocated with PyTorch and returned. Every
tensor of a launch is marked as used on the current stream
(``Tensor.record_stream``), so one the caller drops before the launch has
run is not reused under it, even if it was made on another stream; memory
PyTorch's allocator does not own (``torch.from_dlpack`` of another
framework's) is its owner's to keep until the launch has run, as for
PyTorch's own ops. The ops of ``coda_rs.block`` and ``coda_rs.head``
(registered with ``torch.library``) rely on stream order alone, as PyTorch's own ops do, so
that CUDA graph trees can checkpoint their memory pool around them.

Partial outputs (``RowPartial``, ``ColPartial``, ``LsePartial``) are f32
tensors laid out per output tile (``program_info`` gives each parameter's
kind; the README's output table their shapes); ``row_sums``, ``col_sums``
and ``row_lse`` finish them.
"""

from ._coda import ArgumentError, CodaError, program_info, programs
from . import _coda, llama
from ._errors import argument_error, f32_number

__all__ = [
    "ArgumentError",
    "CodaError",
    "col_sums",
    "launch",
    "llama",
    "pool_memory",
    "program_info",
    "programs",
    "reset_pool_peak",
    "row_lse",
    "row_sums",
]

_DTYPES = {"bf16": "bfloat16", "f32": "float32", "i32": "int32"}


def _detached(t):
    # DLPack export refuses tensors that require grad; the launch is not differentiated.
    return t.detach() if hasattr(t, "detach") else t


def launch(program, /, *, a=None, b=None, **arguments):
    """Runs ``program`` on torch CUDA tensors on the current stream.

    ``a`` ``[M, K]`` and ``b`` (``[N, K]``, or ``[K, N]`` where the program's
    ``b_layout`` is ``"kn"``) are the GEMM operands (none for a map program);
    every other keyword is a parameter or scalar of the program, by its name
    in the DSL. Outputs may be passed (written in place) or left out (then
    allocated). Returns ``{name: tensor}`` for every output.
    """
    info = program_info(program)
    params, scalars = info["params"], info["scalars"]
    known = {p["name"] for p in params} | set(scalars)
    for name in arguments:
        if name not in known:
            raise argument_error(name, f"{info['name']} has no parameter `{name}`; it has {', '.join(sorted(known))}")
    for p in params:
        if not p["output"] and arguments.get(p["name"]) is None:
            raise argument_error(p["name"], f"input `{p['name']}` ({p['shape']}<{p['dtype']}>) is missing")
    values = []
    for s in scalars:
        if s not in arguments:
            raise argument_error(s, f"scalar `{s}` is missing")
        values.append(f32_number(s, arguments[s]))
    if info["map"]:
        if a is not None or b is not None:
            raise argument_error("a", f"{info['name']} is a map program: it takes no GEMM operands")
        first = next(p["name"] for p in params if not p["output"] and p["shape"] == "Tile")
        operands = [(first, arguments[first])]
    else:
        if a is None or b is None:
            raise argument_error("a" if a is None else "b", f"{info['name']} is a GEMM program: pass `a` and `b`")
        operands = [("a", a), ("b", b)]
    # Where every tensor lives, checked before PyTorch or a GPU is needed.
    device = _coda.cuda_device(*operands[0])
    given = [(p["name"], arguments[p["name"]]) for p in params if arguments.get(p["name"]) is not None]
    for name, t in operands[1:] + given:
        if _coda.cuda_device(name, t) != device:
            raise argument_error(name, f"is on CUDA device {_coda.cuda_device(name, t)}; `{operands[0][0]}` is on device {device}")

    try:
        import torch
    except ImportError as e:
        raise CodaError(f"launches need PyTorch with CUDA: {e}") from None
    for p in params:
        t = arguments.get(p["name"])
        if p["output"] and getattr(t, "requires_grad", False):
            raise argument_error(p["name"], "an output written in place must not require grad (CODA launches are not differentiated)")

    with torch.cuda.device(device):
        choice, dims = _coda.plan(info["name"], device, [_detached(t) for _, t in operands])
        tensors, outputs = [], {}
        for p, shape in zip(params, dims):
            t = arguments.get(p["name"])
            if t is None:
                # Rank-1 outputs may be left unwritten where a rule says so
                # (`gather` at an ignored target): they start at zero.
                fill = torch.zeros if p["shape"] in ("PerRow", "PerCol") else torch.empty
                t = fill(shape, dtype=getattr(torch, _DTYPES[p["dtype"]]), device=f"cuda:{device}")
            if p["output"]:
                outputs[p["name"]] = t
            tensors.append(_detached(t))
        ops = (None, None) if info["map"] else (_detached(a), _detached(b))
        _coda.launch(info["name"], device, choice, *ops, tensors, values)
    for name, t in outputs.items():
        if arguments.get(name) is not None:
            # Written in place: autograd must see that these tensors changed.
            torch.autograd.graph.increment_version(t)
    return outputs


def _device(device):
    """A CUDA device index from an int, ``"cuda:N"`` or a ``torch.device``."""
    import torch

    try:
        d = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    except (TypeError, RuntimeError, ValueError):
        raise argument_error("device", f"{device!r} is not a CUDA device") from None
    if d.type != "cuda":
        raise argument_error("device", f"{device!r} is not a CUDA device")
    index = torch.cuda.current_device() if d.index is None else d.index
    if not 0 <= index < torch.cuda.device_count():
        raise argument_error("device", f"CUDA device {index} does not exist here ({torch.cuda.device_count()} devices)")
    return index


def pool_memory(device):
    """``(used, peak)`` bytes of ``device``'s CUDA memory pool, where CODA
    allocates its own buffers (the LM-head tail's chunks, GEMM workspaces)
    and PyTorch's allocator does not: add ``peak`` to
    ``torch.cuda.max_memory_allocated`` for a bound on a step's memory."""
    import torch

    index = _device(device)
    with torch.cuda.device(index):  # the pool's context is made current; PyTorch's device is restored
        return _coda.pool_memory(index)


def reset_pool_peak(device):
    """Starts ``pool_memory``'s peak of ``device`` again from what is in use now."""
    import torch

    index = _device(device)
    with torch.cuda.device(index):
        _coda.reset_pool_peak(index)


def row_sums(partial, m):
    """Per-row sums ``[M]`` from a ``RowPartial`` output (one row of sums per column tile)."""
    return partial.sum(0)[:m]


def col_sums(partial, n):
    """Per-column sums ``[N]`` from a ``ColPartial`` output (one row of sums per row tile)."""
    return partial.sum(0)[:n]


def row_lse(partial, m):
    """Per-row log-sum-exp ``[M]`` from an ``LsePartial`` output (per column
    tile: the row maxima, then the sums of exp(x − max)): each tile's
    max + log(sum), combined over tiles by ``torch.logsumexp``."""
    import torch

    return torch.logsumexp(partial[0, :, :m] + torch.log(partial[1, :, :m]), dim=0)
