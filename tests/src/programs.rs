//! Variants that exercise every load kind, f32 outputs, scalars, the other
//! schedules and tiles. Each is compiled by this crate's build script and
//! verified on the GPU by `tests/gpu.rs`.

use coda_runtime as coda;

#[coda::epilogue(tile = (128, 128), cluster = (2, 1), schedule = pingpong)]
/// No C operand, an f32 D, a TMA tile load, row and column broadcasts, a scalar.
pub fn gated_mix(acc: Acc, bias: PerCol<f32>, scale: PerRow<bf16>, gate: Tile<bf16>, alpha: Scalar)
    -> (Tile<f32>, Tile<bf16>, RowPartial<f32>) {
    let pre = acc * scale + bias;
    let act = select(max(pre, 0.0), silu(pre), tanh(pre));
    let y = max(act * sigmoid(gate), -alpha);
    let e = exp(min(y, 0.0)) / sqrt(abs(pre) + 1.0);
    let s = row_sum(e * e);
    (y, e, s)
}

#[coda::epilogue(tile = (256, 128), cluster = (1, 2))]
/// A residual C operand beside a second TMA tile load, and two partial sums.
pub fn two_partials(acc: Acc, res: Tile<bf16>, other: Tile<bf16>, eps: Scalar)
    -> (Tile<bf16>, RowPartial<f32>, RowPartial<f32>) {
    let h = acc + res;
    let g = h * rsqrt(other * other + eps);
    let sum_g = row_sum(g);
    let sum_log = row_sum(log(abs(h) + 1.0) - 0.5);
    (g, sum_g, sum_log)
}

#[coda::epilogue(tile = (128, 128), schedule = pingpong)]
/// qkv epilogue: row scale, then RoPE on adjacent pairs, with the angle
/// `pos[m] · freq[n]` computed in the epilogue (freq equal within a pair).
pub fn rowscale_rope(acc: Acc, r: PerRow<f32>, pos: PerRow<f32>, freq: PerCol<f32>) -> Tile<bf16> {
    let q = acc * r;
    let (x0, x1) = unpair(q);
    let angle = pos * freq;
    let (c, _) = unpair(cos(angle));
    let (s, _) = unpair(sin(angle));
    let y = pair(x0 * c - x1 * s, x0 * s + x1 * c);
    y
}

#[coda::epilogue]
/// dSwiGLU epilogue of `dy1 = dh2 · Wd`: loads the saved pre-activation pairs
/// `z1` `[M, 2N]`, writes `dz1` interleaved `[M, 2N]`, recomputes `y1` and
/// emits the `s1` partials `Σ dz1 ⊙ z1`.
pub fn dswiglu(acc: Acc, z1: DoubleTile<bf16>) -> (Tile<bf16>, DoubleTile<bf16>, RowPartial<f32>) {
    let (g, u) = unpair(z1);
    let sg = sigmoid(g);
    let dg = acc * u * sg * (1.0 + g * (1.0 - sg));
    let du = acc * g * sg;
    let dz1 = pair(dg, du);
    let y1 = g * sg * u;
    let s1 = row_sum(dg * g + du * u);
    (y1, dz1, s1)
}

#[coda::epilogue(tile = (256, 128), cluster = (1, 2))]
/// RMSNorm backward's weight statistic: `dγ` partials `Σ_m g ⊙ x̂` per M-tile,
/// with `x̂ = r ⊙ h`, beside a per-row dot product and the `x̂ ⊙ γ` store.
pub fn norm_weight_grad(acc: Acc, h: Tile<bf16>, r: PerRow<f32>, gamma: PerCol<bf16>)
    -> (Tile<bf16>, ColPartial<f32>, RowPartial<f32>) {
    let xhat = h * r;
    let xg = xhat * gamma;
    let dgamma = col_sum(acc * xhat);
    let s = row_sum(acc * xg);
    (xg, dgamma, s)
}

#[coda::epilogue(tile = (128, 128))]
/// Rank-1 stores of both orientations beside a tile: a row-uniform value per
/// row and a column-uniform value per column.
pub fn rank_one_stores(acc: Acc, r: PerRow<f32>, eps: Scalar, gamma: PerCol<bf16>)
    -> (Tile<bf16>, PerRow<bf16>, PerCol<f32>) {
    let y = acc * r * gamma;
    let r2 = rsqrt(r * r + eps);
    let g2 = gamma * gamma + 1.0;
    (y, r2, g2)
}

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// A plain GEMM `A · Bᵀ`, bf16 out: our CUTLASS mainloop without an
/// epilogue, the second baseline of `coda bench`.
pub fn linear(acc: Acc) -> Tile<bf16> {
    let y = acc;
    y
}

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// SwiGLU over interleaved (gate, up) columns without a row scale:
/// `[M, 2n]` accumulator → `[M, n]`.
pub fn swiglu(acc: Acc) -> HalfTile<bf16> {
    let (g, u) = unpair(acc);
    let y = silu(g) * u;
    y
}

#[coda::epilogue(tile = (128, 128), schedule = pingpong)]
/// Each special-function-unit map on its own f32 output, for their measured
/// errors (README, "Maps") and IEEE special values, on `x` and `y` as the
/// GPU tests set them (wide ranges; NaN, ±∞, ±0, subnormals).
pub fn math_functions(x: Tile<f32>, y: Tile<f32>)
    -> (Tile<f32>, Tile<f32>, Tile<f32>, Tile<f32>, Tile<f32>, Tile<f32>, Tile<f32>) {
    let e = exp(x);
    let l = log(y);
    let t = tanh(x);
    let s = sigmoid(x);
    let si = silu(x);
    let q = x / y;
    let r = rsqrt(y);
    (e, l, t, s, si, q, r)
}

#[coda::epilogue(tile = (128, 128), schedule = pingpong)]
/// As `math_functions`, for the activations built on them, `pow`, `sin`
/// and `cos` of `angle`, and the six comparisons of `x` with `angle` (one
/// bit each).
pub fn math_activations(x: Tile<f32>, angle: Tile<f32>)
    -> (Tile<f32>, Tile<f32>, Tile<f32>, Tile<f32>, Tile<f32>, Tile<f32>, Tile<f32>) {
    let g = gelu(x);
    let ge = gelu_exact(x);
    let sp = softplus(x);
    let p = pow(x, 5);
    let sn = sin(angle);
    let cs = cos(angle);
    let cmp = (x > angle) + 2.0 * (x >= angle) + 4.0 * (x < angle) + 8.0 * (x <= angle) + 16.0 * (x == angle) + 32.0 * (x != angle);
    (g, ge, sp, p, sn, cs, cmp)
}

#[coda::epilogue]
/// `row_lse` alone over a map program's f32 tile: rows the GPU tests fill
/// with −∞, ±1e4, a single finite column, NaN and +∞.
pub fn lse_rows(x: Tile<f32>) -> LsePartial<f32> {
    let l = row_lse(x);
    l
}

#[coda::epilogue]
/// QK-norm then RoPE in the qkv epilogue: each head's 128 columns
/// RMS-normalised and scaled by `gamma` where `qk` is nonzero (the q and k
/// heads; the v heads pass through), then rotated by `pos[m] · freq[n]`.
pub fn qk_norm_rope(acc: Acc, r: PerRow<f32>, gamma: PerCol<bf16>, qk: PerCol<f32>, pos: PerRow<f32>, freq: PerCol<f32>)
    -> Tile<bf16> {
    let x = acc * r;
    let normed = x * rsqrt(group_mean(x * x, 128) + 0.000001) * gamma;
    let q = select(qk, normed, x);
    let (x0, x1) = unpair(q);
    let (angle, _) = unpair(pos * freq);
    let c = cos(angle);
    let s = sin(angle);
    let y = pair(x0 * c - x1 * s, x0 * s + x1 * c);
    y
}

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// Blockwise quantisation scales: each row's amax over its 1×64 blocks
/// (stored once per block), the tile scaled into e4m3's range by it, and the
/// sum over each block.
pub fn block_amax(acc: Acc, bias: PerCol<f32>) -> (Tile<bf16>, PerGroup<f32>, Tile<f32>) {
    let x = acc + bias;
    let amax = group_max(abs(x), 64);
    let y = x * (448.0 / max(amax, 0.0001));
    let total = group_sum(x, 64);
    (y, amax, total)
}

#[coda::epilogue(a = e4m3, b = e4m3, cluster = (1, 2))]
/// SwiGLU on an FP8 GEMM with per-tensor scales (their product a runtime scalar).
pub fn fp8_swiglu(acc: Acc, scale: Scalar) -> HalfTile<bf16> {
    let x = acc * scale;
    let (g, u) = unpair(x);
    let y = silu(g) * u;
    y
}

#[coda::epilogue(a = e4m3, b = e4m3)]
/// The o_proj epilogue on an FP8 GEMM with row-wise scales: per-row (token)
/// scales of A and per-column (channel) scales of B, then residual + RMS.
pub fn fp8_residual_rms(acc: Acc, sa: PerRow<f32>, sb: PerCol<f32>, z: Tile<bf16>, gamma: PerCol<bf16>)
    -> (Tile<bf16>, Tile<bf16>, RowPartial<f32>) {
    let h = acc * sa * sb + z;
    let u = h * gamma;
    let sq = row_sum(h * h);
    (h, u, sq)
}

#[coda::epilogue(a = e4m3, b = e4m3, scale = blockwise(1x128, 128x128), cluster = (1, 2))]
/// SwiGLU on DeepSeek-V3's blockwise-scaled FP8 GEMM (scales applied in the mainloop).
pub fn fp8_blockwise_swiglu(acc: Acc) -> HalfTile<bf16> {
    let (g, u) = unpair(acc);
    let y = silu(g) * u;
    y
}

#[coda::epilogue(a = e5m2, b = e4m3, scale = blockwise(1x128, 128x128))]
/// An e5m2 × e4m3 blockwise GEMM (a gradient times a weight) whose output is
/// quantised again for the next FP8 GEMM: e4m3 scaled by each row's fresh
/// amax over its 1 × 128 blocks, and the dequantisation scales `[N/128, M]`,
/// the next blockwise GEMM's `a_scale` as they are; beside the bf16 value.
pub fn fp8_requant(acc: Acc, bias: PerCol<f32>) -> (Tile<e4m3>, PerGroup<f32>, Tile<bf16>) {
    let x = acc + bias;
    let amax = max(group_max(abs(x), 128), 0.0001);
    let q = x * (448.0 / amax);
    let scale = amax / 448.0;
    (q, scale, x)
}

#[coda::epilogue]
/// FP8 delayed scaling (Transformer Engine's recipe) after a bf16 GEMM: the
/// output with a bias, stored e4m3 by the scale the previous step's amax
/// gave, and this step's amax of it per row (`aux::row_maxes`, or
/// `aux::max_of_all` for the tensor's) for the next scale; and each column's
/// signed maximum, so that negative maxima and −∞ identities are checked too.
pub fn fp8_delayed_scaling(acc: Acc, bias: PerCol<f32>, scale: Scalar) -> (Tile<e4m3>, RowMaxPartial<f32>, ColMaxPartial<f32>) {
    let y = acc + bias;
    let q = y * scale;
    let amax = row_max(abs(y));
    let top = col_max(y);
    (q, amax, top)
}

#[coda::epilogue(a = e4m3, b = e4m3, cluster = (1, 2), tile = (128, 128))]
/// An FP8 GEMM whose epilogue takes much of the shared memory (an f32 tile
/// input, two half-width outputs), so its mainloop has fewer stages than the
/// other FP8 programs': the accumulator stored as it is. `random_000` of seed
/// 0x5e330001 as it was, but for its `acc / acc` (NaN where the tensor cores'
/// FP8 sum gave 0 for an exact −2⁻¹⁸: bench/NOTES.md, session 35).
pub fn fp8_few_stages(x0: PerRow<bf16>, acc: Acc, x2: Tile<f32>, x3: PerCol<f32>)
    -> (HalfTile<bf16>, RowPartial<f32>, Tile<bf16>, HalfTile<bf16>, PerRow<bf16>) {
    let v0 = row_sum(silu(x3));
    let (v1, v2) = unpair(x0 * 3.0 * x2);
    let v3 = x0;
    let v4 = acc;
    (v1, v0, v4, v2, v3)
}

#[coda::epilogue]
/// A gated pair input normalised per head of 128 columns. Both paths of a
/// `DoubleTile` input (`coda_dsl::smem::pairs_staged`): in the own
/// cooperative config the pairs staged by TMA would leave the mainloop no
/// stage beside the 128-column subtiles, so each thread loads them; the
/// ping-pong config stages them.
pub fn pair_head_norm(acc: Acc, z: DoubleTile<bf16>) -> Tile<bf16> {
    let (g, u) = unpair(z);
    let h = acc * silu(g) + u;
    let y = h * rsqrt(group_mean(h * h, 128) + 0.000001);
    y
}

#[coda::epilogue(tile = (128, 128), schedule = pingpong)]
/// A map program with a store of each kind, 64 columns wide
/// (`coda_dsl::smem::subtile`; in the cooperative 128 × 256 config the wide
/// tiles would leave the mainloop less than two stages, so 32 there).
pub fn map_stores(x: Tile<bf16>, s: PerRow<f32>, bias: PerCol<bf16>)
    -> (Tile<bf16>, HalfTile<bf16>, DoubleTile<bf16>, ColPartial<f32>, RowPartial<f32>) {
    let y = x * s + bias;
    let (e, o) = unpair(y);
    let h = e * sigmoid(o);
    let d = pair(y, x * 2.0);
    let c = col_sum(y);
    let r = row_sum(y * y);
    (y, h, d, c, r)
}

#[coda::epilogue]
/// A map program with a `DoubleTile` input, 64 columns wide, its pairs
/// loaded by each thread (staged by TMA they would fit at neither width).
pub fn map_pairs(x: Tile<bf16>, z: DoubleTile<bf16>, s: PerRow<f32>) -> (Tile<bf16>, RowPartial<f32>) {
    let (g, u) = unpair(z);
    let y = g * sigmoid(g) * u * s + x;
    let r = row_sum(y);
    (y, r)
}

#[coda::epilogue(tile = (128, 128))]
/// Names the generated code uses for its own: C++ keywords (`float`, `new`),
/// the functor's `i`, `out`, what it calls (`sqrtf`) and its inlined
/// `t<id>`, a macro the build defines (`NDEBUG`); the launcher's `stream`,
/// `choice`, `prob` and a partial's `<name>_buf`. Each must compile and
/// read its own argument.
pub fn cpp_names(
    acc: Acc,
    i: PerRow<f32>,
    out: PerCol<bf16>,
    float: Tile<bf16>,
    stream: Scalar,
    choice: PerRow<f32>,
    prob_buf: PerCol<f32>,
    NDEBUG: PerCol<f32>,
) -> (Tile<bf16>, Tile<f32>, RowPartial<f32>) {
    let t3 = acc * i + float;
    let sqrtf = t3 * out - stream * NDEBUG;
    let y = sqrtf * choice + t3 * sigmoid(sqrtf) + prob_buf;
    let new = y * y;
    let prob = row_sum(t3);
    (y, new, prob)
}

#[coda::epilogue(a = e4m3, b = e4m3, accum = fast)]
/// `fp8_swiglu` with fast accumulation (Transformer Engine's forward GEMMs):
/// no promotion, so the default configs of a bf16 program.
pub fn fp8_fast_swiglu(acc: Acc, scale: Scalar) -> HalfTile<bf16> {
    let x = acc * scale;
    let (g, u) = unpair(x);
    let y = silu(g) * u;
    y
}

#[coda::epilogue(a = e4m3, b = e4m3, accum = fast)]
/// `fp8_residual_rms` with fast accumulation.
pub fn fp8_fast_residual_rms(acc: Acc, sa: PerRow<f32>, sb: PerCol<f32>, z: Tile<bf16>, gamma: PerCol<bf16>)
    -> (Tile<bf16>, Tile<bf16>, RowPartial<f32>) {
    let h = acc * sa * sb + z;
    let u = h * gamma;
    let sq = row_sum(h * h);
    (h, u, sq)
}

/// Every program of this file (for tools: `coda inspect`, `coda tune`).
pub fn kernels() -> [&'static coda::Kernel; 25] {
    [
        &gated_mix::KERNEL,
        &two_partials::KERNEL,
        &rowscale_rope::KERNEL,
        &dswiglu::KERNEL,
        &norm_weight_grad::KERNEL,
        &rank_one_stores::KERNEL,
        &linear::KERNEL,
        &swiglu::KERNEL,
        &math_functions::KERNEL,
        &math_activations::KERNEL,
        &lse_rows::KERNEL,
        &qk_norm_rope::KERNEL,
        &block_amax::KERNEL,
        &fp8_swiglu::KERNEL,
        &fp8_fast_swiglu::KERNEL,
        &fp8_residual_rms::KERNEL,
        &fp8_fast_residual_rms::KERNEL,
        &fp8_blockwise_swiglu::KERNEL,
        &fp8_requant::KERNEL,
        &fp8_delayed_scaling::KERNEL,
        &fp8_few_stages::KERNEL,
        &pair_head_norm::KERNEL,
        &map_stores::KERNEL,
        &map_pairs::KERNEL,
        &cpp_names::KERNEL,
    ]
}
