//! Argument rules, checked without a GPU: every bad input names the argument
//! and the rule, and nothing is launched (the launchers here would abort).

use coda_runtime::dsl::ir::{BLayout, DType, OperandScale, Operands, Shape};
use coda_runtime::ffi::GemmLaunch;
use coda_runtime::dsl::ir::Config;
use coda_runtime::dsl::work::Work;
use coda_runtime::{ArgDesc, Error, Kernel, ParamInfo, Problem, Span, Variant, check_args, check_disjoint};

unsafe extern "C" fn never_run(_: *mut GemmLaunch) -> i32 {
    std::process::abort()
}
unsafe extern "C" fn never_size(_: *mut GemmLaunch, _: *mut usize) -> i32 {
    std::process::abort()
}

const PARAMS: &[ParamInfo] = &[
    ParamInfo { name: "z", shape: Shape::Tile, dtype: DType::Bf16, output: false },
    ParamInfo { name: "gamma", shape: Shape::PerCol, dtype: DType::Bf16, output: false },
    ParamInfo { name: "h", shape: Shape::Tile, dtype: DType::Bf16, output: true },
    ParamInfo { name: "u", shape: Shape::Tile, dtype: DType::Bf16, output: true },
    ParamInfo { name: "sq", shape: Shape::RowPartial, dtype: DType::F32, output: true },
];
// SAFETY: never launched (the launchers abort).
const VARIANTS: &[Variant] = &[unsafe { Variant::new(OWN, "test", "", never_run, never_size) }];
/// The o_proj program's rules: z, gamma in; h, u, sq out.
// SAFETY: never launched.
static KERNEL: Kernel =
    unsafe { Kernel::new("coda-test::residual_rms_partial", BLayout::Nk, false, PARAMS, &[], VARIANTS, "none", Work::ZERO) };
/// The program's own config: cooperative 128×256, so `sq` is `[ceil(N / 256), round_up(M, 128)]`.
const OWN: Config = Config::DEFAULT;

struct Case {
    dims: Vec<Vec<usize>>,
    dtypes: Vec<DType>,
    addrs: Vec<u64>,
    ordinals: Vec<usize>,
    on_stream: Vec<bool>,
    /// Passed as outputs (`TensorArg::Out`).
    outputs: Vec<bool>,
    /// Bytes the allocation spans, when not `product(dims) × size`.
    bytes: Vec<Option<usize>>,
}

const NAMES: [&str; 7] = ["a", "b", "z", "gamma", "h", "u", "sq"];

/// A valid launch at M = 1000, N = 520, K = 264; each test breaks one thing.
fn valid() -> Case {
    sized(1000, 520, 264)
}

/// The program's arguments at M, N, K, each of its rule's shape (`sq`: the
/// own config's 128 × 256 tiles), laid out one after another.
fn sized(m: usize, n: usize, k: usize) -> Case {
    let dims = vec![vec![m, k], vec![n, k], vec![m, n], vec![n], vec![m, n], vec![m, n], vec![n.div_ceil(256), m.div_ceil(128) * 128]];
    let mut addrs = vec![];
    let mut next = 0x1000_0000u64;
    for (d, t) in dims.iter().zip([2, 2, 2, 2, 2, 2, 4]) {
        addrs.push(next);
        next += (d.iter().product::<usize>() * t) as u64 + 256;
        next = next.div_ceil(256) * 256;
    }
    let mut dtypes = vec![DType::Bf16; 6];
    dtypes.push(DType::F32);
    let outputs = vec![false, false, false, false, true, true, true];
    Case { dims, dtypes, addrs, ordinals: vec![0; 7], on_stream: vec![true; 7], outputs, bytes: vec![None; 7] }
}

fn run(c: &Case) -> Result<Problem, Error> {
    run_with(&KERNEL, c)
}

fn run_with(kernel: &Kernel, c: &Case) -> Result<Problem, Error> {
    run_in(kernel, &kernel.variants()[0].config(), c)
}

fn run_in(kernel: &Kernel, config: &Config, c: &Case) -> Result<Problem, Error> {
    let descs = descs(c);
    check_args(kernel, config, 0, &descs[0], &descs[1], None, &descs[2..], 0)
}

fn descs(c: &Case) -> Vec<ArgDesc<'_>> {
    (0..7)
        .map(|i| ArgDesc {
            name: NAMES[i],
            dtype: c.dtypes[i],
            dims: &c.dims[i],
            address: c.addrs[i],
            bytes: c.bytes[i].unwrap_or(c.dims[i].iter().product::<usize>() * c.dtypes[i].bytes()),
            ordinal: c.ordinals[i],
            on_stream: c.on_stream[i],
            output: c.outputs[i],
        })
        .collect()
}

/// Arguments `(name, dtype, dims, output)` on device 0 and the launch
/// stream, laid out one after another (256-byte aligned), spanning their shapes.
fn laid_out<'a>(args: &'a [(&'a str, DType, Vec<usize>, bool)]) -> Vec<ArgDesc<'a>> {
    let mut address = 0x1000_0000u64;
    args.iter()
        .map(|(name, dtype, dims, output)| {
            let bytes = dims.iter().product::<usize>() * dtype.bytes();
            let d = ArgDesc { name, dtype: *dtype, dims, address, bytes, ordinal: 0, on_stream: true, output: *output };
            address = (address + bytes as u64).div_ceil(256) * 256;
            d
        })
        .collect()
}

fn refused(c: &Case, name: &str, rule: &str) {
    match run(c) {
        Err(Error::Arg { name: n, rule: r }) => {
            assert_eq!(n, name, "wrong argument named (rule: {r})");
            assert!(r.contains(rule), "rule `{r}` should mention `{rule}`");
        }
        other => panic!("expected `{name}` to be refused for `{rule}`, got {other:?}"),
    }
}

#[test]
fn a_valid_launch_passes() {
    assert_eq!(run(&valid()).unwrap(), Problem { m: 1000, n: 520, k: 264 });
}

#[test]
fn misaligned_leading_dimensions_are_refused() {
    let mut c = valid();
    c.dims[0] = vec![1000, 260];
    c.dims[1] = vec![520, 260];
    refused(&c, "a", "K = 260 must be a multiple of 8");
    let mut c = valid();
    c.dims[1] = vec![516, 264];
    for i in [2, 4, 5] {
        c.dims[i] = vec![1000, 516];
    }
    c.dims[3] = vec![516];
    refused(&c, "b", "N = 516 must be a multiple of 8");
}

#[test]
fn wrong_shapes_are_refused() {
    let mut c = valid();
    c.dims[1] = vec![520, 256];
    refused(&c, "b", "must be [N, K] with K = 264");
    let mut c = valid();
    c.dims[2] = vec![1000, 512];
    refused(&c, "z", "shape [1000, 512] must be [M, N] = [1000, 520]");
    let mut c = valid();
    c.dims[3] = vec![1000];
    refused(&c, "gamma", "must be [N] = [520]");
    let mut c = valid();
    c.dims[6] = vec![3, 1000];
    refused(&c, "sq", "round_up(M, 128)] = [3, 1024]");
    let mut c = valid();
    c.dims[0] = vec![1000 * 264];
    refused(&c, "a", "must be rank 2");
}

/// Partials are laid out by the tile of the config a launch runs: the own
/// config's `sq` `[3, 1024]` is refused for a 256×128 config, whose rule says
/// `[5, 1024]`, and accepted when reshaped.
#[test]
fn partials_follow_the_launch_config() {
    let tall = Config { tile_m: 256, tile_n: 128, cluster_n: 2, ..OWN };
    let descs = |c: &Case| -> Vec<(Vec<usize>, DType, u64)> {
        (0..7).map(|i| (c.dims[i].clone(), c.dtypes[i], c.addrs[i])).collect()
    };
    let check = |c: &Case| {
        let d = descs(c);
        let args: Vec<ArgDesc> = (0..7)
            .map(|i| ArgDesc {
                name: NAMES[i],
                dtype: d[i].1,
                dims: &d[i].0,
                address: d[i].2,
                bytes: d[i].0.iter().product::<usize>() * d[i].1.bytes(),
                ordinal: 0,
                on_stream: true,
                output: i >= 4,
            })
            .collect();
        check_args(&KERNEL, &tall, 0, &args[0], &args[1], None, &args[2..], 0)
    };
    match check(&valid()) {
        Err(Error::Arg { name, rule }) => {
            assert_eq!(name, "sq");
            assert!(rule.contains("[ceil(N / 128), round_up(M, 256)] = [5, 1024]"), "{rule}");
        }
        other => panic!("expected `sq` refused, got {other:?}"),
    }
    let mut c = valid();
    c.dims[6] = vec![5, 1024];
    assert_eq!(check(&c).unwrap(), Problem { m: 1000, n: 520, k: 264 });
}

#[test]
fn empty_shapes_are_refused() {
    let mut c = valid();
    c.dims[0] = vec![0, 264];
    refused(&c, "a", "is empty");
    let mut c = valid();
    c.dims[1] = vec![0, 264];
    refused(&c, "b", "is empty");
}

#[test]
fn dtype_mismatches_are_refused() {
    let mut c = valid();
    c.dtypes[6] = DType::Bf16;
    refused(&c, "sq", "dtype must be F32");
    let mut c = valid();
    c.dtypes[0] = DType::F32;
    refused(&c, "a", "is a GEMM operand of bf16 elements in this program, got f32");
}

#[test]
fn misaligned_addresses_are_refused() {
    let mut c = valid();
    c.addrs[3] += 8;
    refused(&c, "gamma", "must be 16-byte aligned");
}

#[test]
fn other_devices_and_streams_are_refused() {
    let mut c = valid();
    c.ordinals[4] = 1;
    refused(&c, "h", "is on device 1");
    let mut c = valid();
    c.on_stream[2] = false;
    refused(&c, "z", "allocated on another stream");
}

#[test]
fn outputs_must_not_alias() {
    let mut c = valid();
    c.addrs[4] = c.addrs[2]; // h over z: an in-place residual update
    refused(&c, "h", "output overlaps `z`");
    let mut c = valid();
    c.addrs[5] = c.addrs[4] + 64; // u overlaps h
    refused(&c, "h", "output overlaps `u`");
}

/// The rule the finishers and ops share: a written span overlapping any other
/// is refused by its name; read spans may overlap, touching ones and empty
/// ones do not overlap, and spans at the top of the address space do not wrap.
#[test]
fn written_spans_must_be_disjoint() {
    let span = |name, address, bytes, written| Span { name, address, bytes, written };
    let check = |spans: &[Span]| check_disjoint(spans).map_err(|e| match e {
        Error::Arg { name, rule } => format!("{name}: {rule}"),
        other => panic!("{other:?}"),
    });
    assert_eq!(check(&[span("a", 0x1000, 64, false), span("b", 0x1000, 64, false)]), Ok(()));
    assert_eq!(check(&[span("a", 0x1000, 64, false), span("out", 0x1040, 64, true)]), Ok(()));
    assert_eq!(check(&[span("out", 0x1000, 0, true), span("a", 0x1000, 64, false)]), Ok(()));
    assert_eq!(check(&[span("a", 0x1000, 64, false), span("out", 0x1000, 0, true)]), Ok(()));
    assert_eq!(
        check(&[span("a", 0x1000, 64, false), span("out", 0x103f, 2, true)]),
        Err("out: output overlaps `a`; outputs must not alias other arguments".into())
    );
    assert_eq!(
        check(&[span("loss", 0x2000, 16, true), span("mean", 0x2008, 4, true)]),
        Err("loss: output overlaps `mean`; outputs must not alias other arguments".into())
    );
    let top = u64::MAX - 15;
    assert_eq!(check(&[span("out", top, 64, true), span("a", 0x1000, 64, false)]), Ok(()));
    assert_eq!(check(&[span("out", top, 64, true), span("a", top + 8, 64, false)]).map_err(|e| e.contains("overlaps `a`")), Err(true));
}

/// With `b_layout = kn` the same problem takes `b` as `[K, N]`.
#[test]
fn a_kn_weight_is_read_as_k_by_n() {
    // SAFETY: never launched.
    static KN: Kernel = unsafe { Kernel::new("coda-test::kn", BLayout::Kn, false, PARAMS, &[], VARIANTS, "none", Work::ZERO) };
    let mut c = valid();
    c.dims[1] = vec![264, 520];
    let run_kn = |c: &Case| run_with(&KN, c);
    assert_eq!(run_kn(&c).unwrap(), Problem { m: 1000, n: 520, k: 264 });
    c.dims[1] = vec![520, 264];
    match run_kn(&c) {
        Err(Error::Arg { name, rule }) => assert!(name == "b" && rule.contains("must be [K, N] with K = 264"), "{rule}"),
        other => panic!("{other:?}"),
    }
}

/// An output passed as an input (the launcher would write through a shared
/// borrow) and an input passed as an output are refused.
#[test]
fn argument_directions_are_checked() {
    let mut c = valid();
    c.outputs[4] = false;
    refused(&c, "h", "is an output of the program: pass it with TensorArg::output");
    let mut c = valid();
    c.outputs[2] = true;
    refused(&c, "z", "is an input of the program: pass it with TensorArg::input");
}

/// An allocation smaller than its shape claims is refused, however the
/// sizes came to disagree.
#[test]
fn allocation_sizes_must_match_shapes() {
    let mut c = valid();
    c.bytes[5] = Some(1000 * 520); // half of u's bf16 elements
    refused(&c, "u", "spans 520000 bytes, its shape [1000, 520] needs Some(1040000)");
}

/// A config with an empty tile (partials' dims divide by it) is refused by
/// its rule, not a division by zero.
#[test]
fn configs_must_pass_their_rules() {
    for config in [Config { tile_m: 0, ..OWN }, Config { tile_n: 0, ..OWN }, Config { cluster_m: 3, ..OWN }] {
        match run_in(&KERNEL, &config, &valid()) {
            Err(Error::Arg { name, rule }) => assert!(name == "config" && rule.contains("is not supported"), "{rule}"),
            other => panic!("expected {config:?} refused, got {other:?}"),
        }
    }
}

/// A span that runs past the end of the address space is refused instead of
/// wrapping around in the overlap test.
#[test]
fn spans_must_fit_the_address_space() {
    let mut c = valid();
    c.addrs[6] = u64::MAX - 15; // sq: 16-byte aligned, 12 KiB long
    refused(&c, "sq", "run past the end of the address space");
}

/// The FP8 program `fp8(acc) -> Tile<e4m3>` with blockwise scales: e4m3
/// operands, K in 16-byte rows, M a multiple of 4, scales of the rule's
/// shapes given exactly when the program has them, and 16-byte output rows.
#[test]
fn fp8_operands_scales_and_rows() {
    const FP8: Config =
        Config { tile_n: 128, operands: Operands { a: DType::E4m3, b: DType::E4m3, scale: OperandScale::Blockwise, ..Operands::BF16 }, ..OWN };
    const Q: &[ParamInfo] = &[ParamInfo { name: "q", shape: Shape::Tile, dtype: DType::E4m3, output: true }];
    // SAFETY: never launched.
    const V: &[Variant] = &[unsafe { Variant::new(FP8, "test", "", never_run, never_size) }];
    // SAFETY: never launched.
    static K: Kernel = unsafe { Kernel::new("coda-test::fp8", BLayout::Nk, false, Q, &[], V, "none", Work::ZERO) };
    assert_eq!(K.operands(), FP8.operands);
    let check = |(m, n, k): (usize, usize, usize), a: DType, scales: Option<([usize; 2], [usize; 2])>| {
        let mut args = vec![("a", a, vec![m, k], false), ("b", DType::E4m3, vec![n, k], false)];
        if let Some((sa, sb)) = scales {
            args.push(("a_scale", DType::F32, sa.to_vec(), false));
            args.push(("b_scale", DType::F32, sb.to_vec(), false));
        }
        args.push(("q", DType::E4m3, vec![m, n], true));
        let descs = laid_out(&args);
        let n_ops = if scales.is_some() { 4 } else { 2 };
        let scales = scales.map(|_| [&descs[2], &descs[3]]);
        check_args(&K, &FP8, 0, &descs[0], &descs[1], scales, &descs[n_ops..], 0)
    };
    let is = |r: Result<Problem, Error>, name: &str, rule: &str| match r {
        Err(Error::Arg { name: n, rule: r }) => assert!(n == name && r.contains(rule), "`{n}`: {r}"),
        other => panic!("expected `{name}` refused for `{rule}`, got {other:?}"),
    };
    // K = 272: two whole scale blocks and a part; N = 528: four blocks and a part.
    let ok = ([3, 1000], [5, 3]);
    assert_eq!(check((1000, 528, 272), DType::E4m3, Some(ok)).unwrap(), Problem { m: 1000, n: 528, k: 272 });
    is(check((1000, 528, 272), DType::Bf16, Some(ok)), "a", "GEMM operand of e4m3 elements");
    is(check((1000, 528, 264), DType::E4m3, Some(([3, 1000], [5, 3]))), "a", "multiple of 16");
    is(check((998, 528, 272), DType::E4m3, Some(([3, 998], [5, 3]))), "a", "M = 998 must be a multiple of 4");
    is(check((1000, 528, 272), DType::E4m3, None), "coda-test::fp8", "launch it with `launch_scaled`");
    is(check((1000, 528, 272), DType::E4m3, Some(([3, 1000], [3, 5]))), "b_scale", "must be [5, 3]");
    is(check((1000, 528, 272), DType::E4m3, Some(([1000, 3], [5, 3]))), "a_scale", "must be [3, 1000]");
    // e4m3 rows of N = 520 are 520 bytes: not whole 16-byte rows.
    is(check((1000, 520, 272), DType::E4m3, Some(([3, 1000], [5, 3]))), "q", "16-byte rows");
    // A bf16 program given scales is told to use `launch`.
    let c = valid();
    let descs = descs(&c);
    is(
        check_args(&KERNEL, &OWN, 0, &descs[0], &descs[1], Some([&descs[2], &descs[3]]), &descs[2..], 0),
        "coda-test::residual_rms_partial",
        "launch it with `launch`",
    );
}

/// A pair program's `[M, 2N]` output: its 2N columns are 32-bit indices in
/// the pair store, so N = 2^30 is refused, naming the output, and
/// N = 2^30 − 8 (a multiple of 8) passes; a `[M, 2N]` input is read as N
/// 32-bit words and has no such limit.
#[test]
fn pair_outputs_keep_two_n_in_32_bits() {
    const P: &[ParamInfo] = &[ParamInfo { name: "pairs", shape: Shape::DoubleTile, dtype: DType::Bf16, output: true }];
    const Q: &[ParamInfo] = &[ParamInfo { name: "pairs", shape: Shape::DoubleTile, dtype: DType::Bf16, output: false }];
    // SAFETY: never launched.
    const V: &[Variant] = &[unsafe { Variant::new(OWN, "test", "", never_run, never_size) }];
    // SAFETY: never launched.
    static OUT: Kernel = unsafe { Kernel::new("coda-test::pairs_out", BLayout::Nk, false, P, &[], V, "none", Work::ZERO) };
    // SAFETY: never launched.
    static IN: Kernel = unsafe { Kernel::new("coda-test::pairs_in", BLayout::Nk, false, Q, &[], V, "none", Work::ZERO) };
    let check = |kernel: &Kernel, n: usize| {
        let args = [
            ("a", DType::Bf16, vec![1, 8], false),
            ("b", DType::Bf16, vec![n, 8], false),
            ("pairs", DType::Bf16, vec![1, 2 * n], kernel.params()[0].output),
        ];
        let descs = laid_out(&args);
        check_args(kernel, &OWN, 0, &descs[0], &descs[1], None, &descs[2..], 0)
    };
    match check(&OUT, 1 << 30) {
        Err(Error::Arg { name, rule }) => assert!(name == "pairs" && rule.contains("2N ≤ 2^31 − 1"), "{name}: {rule}"),
        other => panic!("expected `pairs` refused, got {other:?}"),
    }
    assert_eq!(check(&OUT, (1 << 30) - 8).unwrap(), Problem { m: 1, n: (1 << 30) - 8, k: 8 });
    assert_eq!(check(&IN, 1 << 30).unwrap(), Problem { m: 1, n: 1 << 30, k: 8 });
}

/// What CUTLASS counts in 32 bits, refused before a launch: K's tiles (K
/// up to 2^31 − 128), the output tiles padded to the cluster and swizzle
/// and their rows (M = 2^31 − 1 would make 2^24 tiles of 128 rows, 2^31
/// rows), their count (2^16 × 32776 tiles), and the row partials of CUTLASS's
/// column reduction (`sq`: 32769 × 65536); each just inside its limit passes.
#[test]
fn counts_kept_in_32_bits_are_refused_past_their_limits() {
    let check = |(m, n, k): (usize, usize, usize)| run(&sized(m, n, k));
    let limit = (1usize << 31) - 128;
    assert_eq!(check((8, 8, limit)).unwrap(), Problem { m: 8, n: 8, k: limit });
    let rule = |r: Result<Problem, Error>| match r {
        Err(Error::Arg { name, rule }) => (name, rule),
        other => panic!("expected a refusal, got {other:?}"),
    };
    let (name, r) = rule(check((8, 8, limit + 8)));
    assert!(name == "a" && r.contains("K = 2147483528 must be ≤ 2^31 − 128"), "{name}: {r}");
    for (m, n) in [((1 << 31) - 1, 8), ((1 << 31) - 8, 8), (1 << 23, (1 << 23) + 1024)] {
        let (name, r) = rule(check((m, n, 8)));
        assert!(name == "a" && r.contains("the tile scheduler counts in 32 bits"), "M = {m}, N = {n}: {name}: {r}");
    }
    // Below the grid's limits `sq` is over its own: a program with one tile output.
    const H: &[ParamInfo] = &[ParamInfo { name: "h", shape: Shape::Tile, dtype: DType::Bf16, output: true }];
    // SAFETY: never launched.
    static TILE_OUT: Kernel = unsafe { Kernel::new("coda-test::tile_out", BLayout::Nk, false, H, &[], VARIANTS, "none", Work::ZERO) };
    let tile_out = |(m, n): (usize, usize)| {
        let args = [("a", DType::Bf16, vec![m, 8], false), ("b", DType::Bf16, vec![n, 8], false), ("h", DType::Bf16, vec![m, n], true)];
        let descs = laid_out(&args);
        check_args(&TILE_OUT, &OWN, 0, &descs[0], &descs[1], None, &descs[2..], 0)
    };
    assert!(tile_out(((1 << 31) - 8192, 8)).is_ok(), "2^24 − 64 tiles of 128 rows");
    assert!(tile_out((1 << 23, (1 << 23) - 2048)).is_ok(), "2^16 × 32760 tiles");
    let (name, r) = rule(tile_out((1 << 23, (1 << 23) + 1024)));
    assert!(name == "a" && r.contains("65536 × 32776 tiles"), "{name}: {r}");
    let (name, r) = rule(check((1 << 16, (1 << 23) + 256, 8)));
    assert!(name == "sq" && r.contains("over 2^31 − 1 partials"), "{name}: {r}");
    assert!(check((1 << 16, (1 << 23) - 256, 8)).is_ok(), "32767 × 65536 partials");
}
