//! Aux reductions: finish the per-tile partials that epilogues write. Each is
//! one small deterministic kernel (fixed summation order, no atomics) on the
//! stream, reading only the partials, never a full activation. Beside them,
//! [`repeat_two`] lays small vectors over a projection's columns, and
//! [`scale_into`] scales a tensor by a scalar that stays on the device.

use crate::partials::{ColMaxPartials, ColPartials, Kind, LsePartials, Maxima, Partials, RowMaxPartials, RowPartials};
use crate::dsl::ir::{DType, Shape};
use crate::{AnyTensor, Element, Error, Span, Stream, Tensor, TensorMut, TensorRef, bf16, check_disjoint};

fn len(t: &dyn AnyTensor) -> usize {
    t.dims().iter().product()
}

fn vector(name: &str, t: &dyn AnyTensor, len: usize) -> Result<(), Error> {
    if t.dims() == [len] {
        Ok(())
    } else {
        Err(Error::arg(name, format!("must be [{len}], got shape {:?}", t.dims())))
    }
}

fn same_stream(stream: &Stream, name: &str, t: &dyn AnyTensor) -> Result<(), Error> {
    if t.on_stream(stream) {
        Ok(())
    } else {
        Err(Error::arg(name, "was allocated on another stream; use tensors of the launch stream"))
    }
}

/// `n_classes` as the finishers take it: class ids are `i32`, so a count
/// past `i32::MAX` (or one that wraps the `i64` negative) is refused.
fn class_count(n_classes: usize) -> Result<i64, Error> {
    match i32::try_from(n_classes) {
        Ok(n) if n > 0 => Ok(n.into()),
        _ => Err(Error::arg("n_classes", format!("{n_classes} must be in 1..=2^31 − 1 (class ids are i32)"))),
    }
}

/// Refuses an output overlapping another argument, as launches do (the
/// finishers' pointers are `__restrict__`); `(name, address, bytes, written)`.
fn disjoint(args: &[(&str, u64, usize, bool)]) -> Result<(), Error> {
    let spans: Vec<Span> = args.iter().map(|&(name, address, bytes, written)| Span { name, address, bytes, written }).collect();
    check_disjoint(&spans)
}

fn launched(stream: &Stream, kernel: &'static str, code: i32) -> Result<(), Error> {
    stream.count(crate::stream::LaunchKind::Aux);
    if code == 0 { Ok(()) } else { Err(Error::Kernel { kernel, code, message: "CUDA launch error".into() }) }
}

/// The written partials and the `M` of their producer, checked against `out` `[M]`.
fn row_partials<'p, K: Kind>(partials: &'p Partials<K>, out_name: &str, out: &dyn AnyTensor) -> Result<(&'p Tensor<f32>, usize), Error> {
    let (buf, p) = partials.written("partials")?;
    vector(out_name, out, p.m)?;
    Ok((buf, p.m))
}

/// The `(tiles, padded length)` of a `[tiles, padded]` partials buffer.
fn tiles(buf: &Tensor<f32>) -> (i64, i64) {
    let d = buf.shape();
    (d[d.len() - 2] as i64, d[d.len() - 1] as i64)
}

/// Launches a finisher that reads the `[tiles, pitch]` partials `buf` and
/// writes `out`, once both are checked to be on `stream` and apart:
/// `launch(partials, tiles, pitch, out)` enqueues the kernel and gives its
/// name and CUDA code. The pointers' guards outlive the enqueue.
fn finish(
    stream: &Stream,
    buf: &Tensor<f32>,
    out_name: &str,
    out: &mut dyn TensorMut<f32>,
    launch: impl FnOnce(u64, i64, i64, u64) -> (&'static str, i32),
) -> Result<(), Error> {
    same_stream(stream, "partials", buf)?;
    same_stream(stream, out_name, out.as_any())?;
    stream.cuda().context().bind_to_thread()?;
    let (tiles, pitch) = tiles(buf);
    let out_bytes = out.as_any().bytes();
    let ((p, _read), (o, _write)) = (buf.read_ptr(stream), out.write_ptr(stream));
    disjoint(&[("partials", p, buf.bytes(), false), (out_name, o, out_bytes, true)])?;
    let (kernel, code) = launch(p, tiles, pitch, o);
    launched(stream, kernel, code)
}

/// RMSNorm's inverse RMS from the row-sum-of-squares partials of a program's
/// `row_sum(x * x)`: `r[m] = rsqrt(Σ_t partials[t, m] / d + eps)`; `r` is `[M]`.
pub fn rms_from_partials(stream: &Stream, partials: &RowPartials, d: usize, eps: f32, r: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    let (buf, m) = row_partials(partials, "r", r.as_any())?;
    if d == 0 {
        return Err(Error::arg("d", "the normalized width must be ≥ 1"));
    }
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(Error::arg("eps", format!("{eps} must be finite and ≥ 0")));
    }
    finish(stream, buf, "r", r, |p, n_tiles, m_pad, o| {
        // SAFETY: `buf` is `[n_tiles, m_pad]` with `m ≤ m_pad`, `r` is `[M]` (checked above).
        ("coda_rms_finish", unsafe { crate::ffi::coda_rms_finish(p as _, m as i64, m_pad, n_tiles, 1.0 / d as f32, eps, o as _, stream.raw()) })
    })
}

/// Plain row sums: `out[m] = scale · Σ_t partials[t, m]` (e.g. `s = (1/d) Σ dy ⊙ y`).
pub fn row_sums(stream: &Stream, partials: &RowPartials, scale: f32, out: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    let (buf, m) = row_partials(partials, "out", out.as_any())?;
    finish(stream, buf, "out", out, |p, n_tiles, m_pad, o| {
        // SAFETY: `buf` is `[n_tiles, m_pad]` with `m ≤ m_pad`, `out` is `[M]` (checked above).
        ("coda_row_sum_finish", unsafe { crate::ffi::coda_row_sum_finish(p as _, m as i64, m_pad, n_tiles, scale, o as _, stream.raw()) })
    })
}

/// Column sums over M-tiles: `out[n] = Σ_t partials[t, n]`, from a
/// program's `col_sum` (e.g. `dγ`); `out` is `[N]`.
pub fn col_sums(stream: &Stream, partials: &ColPartials, out: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    col_sums_into(stream, partials, out, false)
}

/// As [`col_sums`], adding into `out` (`out[n] += Σ_t partials[t, n]`): to
/// sum the column statistics of several launches over chunks of rows.
pub fn col_sums_add(stream: &Stream, partials: &ColPartials, out: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    col_sums_into(stream, partials, out, true)
}

fn col_sums_into(stream: &Stream, partials: &ColPartials, out: &mut dyn TensorMut<f32>, accumulate: bool) -> Result<(), Error> {
    let (buf, p) = partials.written("partials")?;
    vector("out", out.as_any(), p.n)?;
    finish(stream, buf, "out", out, |ptr, m_tiles, n_pad, o| {
        // SAFETY: `buf` is `[m_tiles, n_pad]` with `n ≤ n_pad`, `out` is `[N]` (checked above).
        let code = unsafe { crate::ffi::coda_col_sum_finish(ptr as _, p.n as i64, n_pad, m_tiles, accumulate as i32, o as _, stream.raw()) };
        ("coda_col_sum_finish", code)
    })
}

/// The maxima of the written partials per output (row or column), checked
/// against `out` `[M]` or `[N]`; with `all`, the one maximum over them all,
/// `out` `[1]`.
fn maxima<K: Maxima>(stream: &Stream, partials: &Partials<K>, all: bool, out: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    let (buf, p) = partials.written("partials")?;
    let n = if matches!(K::SHAPE, Shape::RowMaxPartial) { p.m } else { p.n };
    vector("out", out.as_any(), if all { 1 } else { n })?;
    finish(stream, buf, "out", out, |ptr, tiles, pitch, o| {
        // SAFETY: the buffer is `[tiles, pitch]` with `n ≤ pitch` (its producer's
        // layout, checked by `written`); `out` is checked above.
        unsafe {
            if all {
                ("coda_max_all_finish", crate::ffi::coda_max_all_finish(ptr as _, n as i64, pitch, tiles, o as _, stream.raw()))
            } else {
                ("coda_max_finish", crate::ffi::coda_max_finish(ptr as _, n as i64, pitch, tiles, o as _, stream.raw()))
            }
        }
    })
}

/// Row maxima over N-tiles: `out[m] = max_t partials[t, m]`, from a
/// program's `row_max` (e.g. per-token amax for FP8 scales); `out` is `[M]`.
/// NaN is ignored, as `max` does; a row with no number gives −∞.
pub fn row_maxes(stream: &Stream, partials: &RowMaxPartials, out: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    maxima(stream, partials, false, out)
}

/// Column maxima over M-tiles: `out[n] = max_t partials[t, n]`, from a
/// program's `col_max`; `out` is `[N]`. NaN is ignored; −∞ where no number.
pub fn col_maxes(stream: &Stream, partials: &ColMaxPartials, out: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    maxima(stream, partials, false, out)
}

/// The maximum over all of a `row_max` or `col_max` output's partials:
/// `out` `[1]`, e.g. a per-tensor amax (`row_max(abs(y))`) for the next step's FP8 scale.
pub fn max_of_all<K: Maxima>(stream: &Stream, partials: &Partials<K>, out: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    maxima(stream, partials, true, out)
}

/// Column sums over M-tiles and over `groups` consecutive groups of
/// columns: `out[j] = Σ_t Σ_{h < groups} partials[t, first + h·g + j]`
/// with `g` = `out`'s length, e.g. the gradient of a norm weight shared by
/// the heads laid side by side in columns `first..first + groups·g`.
pub fn col_sums_grouped(stream: &Stream, partials: &ColPartials, first: usize, groups: usize, out: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    col_sums_grouped_into(stream, partials, first, groups, out, false)
}

/// As [`col_sums_grouped`], adding into `out` (e.g. a gradient summed over micro-batches).
pub fn col_sums_grouped_add(stream: &Stream, partials: &ColPartials, first: usize, groups: usize, out: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    col_sums_grouped_into(stream, partials, first, groups, out, true)
}

fn col_sums_grouped_into(
    stream: &Stream,
    partials: &ColPartials,
    first: usize,
    groups: usize,
    out: &mut dyn TensorMut<f32>,
    accumulate: bool,
) -> Result<(), Error> {
    let (buf, p) = partials.written("partials")?;
    let g = len(out.as_any());
    if out.dims().len() != 1 || g == 0 {
        return Err(Error::arg("out", format!("must be a non-empty vector [g], got shape {:?}", out.dims())));
    }
    if groups == 0 || groups.checked_mul(g).and_then(|w| w.checked_add(first)).is_none_or(|end| end > p.n) {
        return Err(Error::arg(
            "groups",
            format!("{groups} groups of {g} columns from column {first} must be ≥ 1 and fit the partials' {} columns", p.n),
        ));
    }
    finish(stream, buf, "out", out, |ptr, m_tiles, n_pad, o| {
        // SAFETY: every column read, `first + h·g + j < first + groups·g ≤ n ≤ n_pad`, is in the buffer (checked above).
        let code = unsafe {
            crate::ffi::coda_col_group_sum_finish(ptr as _, n_pad, m_tiles, first as i64, groups as i64, g as i64, accumulate as i32, o as _, stream.raw())
        };
        ("coda_col_group_sum_finish", code)
    })
}

/// `out = [a repeated times_a times, b repeated times_b times, 0, …]`, end
/// to end (e.g. per-head norm weights laid over a projection's columns);
/// `a` and `b` are non-empty vectors and the repeats fit in `out`.
pub fn repeat_two(
    stream: &Stream,
    a: &dyn TensorRef<bf16>,
    times_a: usize,
    b: &dyn TensorRef<bf16>,
    times_b: usize,
    out: &mut dyn TensorMut<bf16>,
) -> Result<(), Error> {
    for (name, t) in [("a", a as &dyn AnyTensor), ("b", b as &dyn AnyTensor), ("out", out.as_any())] {
        if t.dims().len() != 1 || len(t) == 0 {
            return Err(Error::arg(name, format!("must be a non-empty vector, got shape {:?}", t.dims())));
        }
        same_stream(stream, name, t)?;
    }
    let (na, nb, n) = (len(a), len(b), len(out.as_any()));
    let filled = na.checked_mul(times_a).zip(nb.checked_mul(times_b)).and_then(|(x, y)| x.checked_add(y));
    if filled.is_none_or(|f| f > n) {
        return Err(Error::arg("out", format!("[{n}] must hold {times_a} × {na} + {times_b} × {nb} elements")));
    }
    stream.cuda().context().bind_to_thread()?;
    let out_bytes = out.as_any().bytes();
    let ((pa, _a), (pb, _b), (o, _o)) = (a.read_ptr(stream), b.read_ptr(stream), out.write_ptr(stream));
    disjoint(&[("a", pa, a.bytes(), false), ("b", pb, b.bytes(), false), ("out", o, out_bytes, true)])?;
    // SAFETY: `na`, `nb` ≥ 1 (no division by zero) and every index read is below them; `out` is `[n]`.
    let code = unsafe {
        crate::ffi::coda_repeat_two_bf16(pa as _, na as i64, times_a as i64, pb as _, nb as i64, times_b as i64, o as _, n as i64, stream.raw())
    };
    launched(stream, "coda_repeat_two_bf16", code)
}

/// `dst = src · g` element by element, in f32 and rounded once into `dst`'s
/// type (bf16 or f32; `src` bf16 or f32); `g` is `[1]`, read on the device,
/// so a loss's gradient scales gradients kept from the forward with no host
/// synchronisation. `src` and `dst` have the same shape; `dst` overlapping
/// `src` or `g` is refused.
pub fn scale_into<S: Element, D: Element>(
    stream: &Stream,
    src: &dyn TensorRef<S>,
    g: &dyn TensorRef<f32>,
    dst: &mut dyn TensorMut<D>,
) -> Result<(), Error> {
    let bf16_or_f32 = |name: &str, t: DType| match t {
        DType::Bf16 => Ok(1),
        DType::F32 => Ok(0),
        other => Err(Error::arg(name, format!("must be bf16 or f32, not {}", other.rust_name()))),
    };
    let (src_bf16, dst_bf16) = (bf16_or_f32("src", S::DTYPE)?, bf16_or_f32("dst", D::DTYPE)?);
    vector("g", g, 1)?;
    if src.dims() != dst.as_any().dims() {
        return Err(Error::arg("dst", format!("shape {:?} must be src's {:?}", dst.as_any().dims(), src.dims())));
    }
    for (name, t) in [("src", src as &dyn AnyTensor), ("g", g as &dyn AnyTensor), ("dst", dst.as_any())] {
        same_stream(stream, name, t)?;
    }
    let n = len(src);
    stream.cuda().context().bind_to_thread()?;
    let dst_bytes = dst.as_any().bytes();
    let ((s, _s), (pg, _g), (d, _d)) = (src.read_ptr(stream), g.read_ptr(stream), dst.write_ptr(stream));
    disjoint(&[("src", s, src.bytes(), false), ("g", pg, g.bytes(), false), ("dst", d, dst_bytes, true)])?;
    // SAFETY: `src` and `dst` hold `n` elements of the types passed; `g` one
    // f32; `dst` overlaps neither (checked above).
    let code = unsafe { crate::ffi::coda_scale_into(s as _, src_bf16, pg as _, d as _, dst_bf16, n as i64, stream.raw()) };
    launched(stream, "coda_scale_into", code)
}

/// Log-sum-exp per row from a program's `row_lse` partials; `lse` is `[M]`.
pub fn lse_from_partials(stream: &Stream, partials: &LsePartials, lse: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    let (buf, m) = row_partials(partials, "lse", lse.as_any())?;
    finish(stream, buf, "lse", lse, |p, n_tiles, m_pad, o| {
        // SAFETY: `buf` is `[n_tiles, m_pad]` with `m ≤ m_pad`, `lse` is `[M]` (checked above).
        ("coda_lse_finish", unsafe { crate::ffi::coda_lse_finish(p as _, m as i64, m_pad, n_tiles, o as _, stream.raw()) })
    })
}

/// Cross-entropy from `lse` and the gathered target logits: `loss[m] = lse[m] −
/// target_logit[m]` for rows whose target is in `[0, n_classes)`, 0 for ignored
/// rows (e.g. target −100), and `mean` `[1]` over the non-ignored rows (NaN if none).
/// `n_classes` outside `1..=2^31 − 1` is [`Error::Arg`].
pub fn cross_entropy_loss(
    stream: &Stream,
    lse: &dyn TensorRef<f32>,
    target_logit: &dyn TensorRef<f32>,
    targets: &dyn TensorRef<i32>,
    n_classes: usize,
    loss: &mut dyn TensorMut<f32>,
    mean: &mut dyn TensorMut<f32>,
) -> Result<(), Error> {
    cross_entropy_loss_with(stream, lse, target_logit, None, targets, n_classes, LossTerms::PLAIN, loss, mean)
}

/// The weights of a per-row loss `lse − target · target_logit − sum · row_sum
/// + lse_squared · lse²` (label smoothing ε over V classes: `target = 1 − ε`,
/// `sum = ε / V`; z-loss: `lse_squared = λ`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossTerms {
    pub target: f32,
    pub sum: f32,
    pub lse_squared: f32,
}

impl LossTerms {
    /// Plain cross-entropy, `lse − target_logit`.
    pub const PLAIN: LossTerms = LossTerms { target: 1.0, sum: 0.0, lse_squared: 0.0 };
}

/// As [`cross_entropy_loss`], each row's loss with `terms`; `row_sum` `[M]`
/// (each row's sum of logits) is needed where `terms.sum` is not 0 and read
/// only there. A term of weight 0 is left out, not multiplied (an infinite
/// `lse` stays infinite rather than turning NaN).
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy_loss_with(
    stream: &Stream,
    lse: &dyn TensorRef<f32>,
    target_logit: &dyn TensorRef<f32>,
    row_sum: Option<&dyn TensorRef<f32>>,
    targets: &dyn TensorRef<i32>,
    n_classes: usize,
    terms: LossTerms,
    loss: &mut dyn TensorMut<f32>,
    mean: &mut dyn TensorMut<f32>,
) -> Result<(), Error> {
    let n = class_count(n_classes)?;
    let m = len(lse);
    if m == 0 {
        return Err(Error::arg("lse", "must have at least one row"));
    }
    if ![terms.target, terms.sum, terms.lse_squared].iter().all(|w| w.is_finite()) {
        return Err(Error::arg("terms", format!("{terms:?} must be finite")));
    }
    let row_sum = match (row_sum, terms.sum != 0.0) {
        (Some(s), true) => Some(s),
        (None, true) => return Err(Error::arg("row_sum", "is needed where terms.sum is not 0")),
        (_, false) => None,
    };
    vector("lse", lse, m)?;
    vector("target_logit", target_logit, m)?;
    vector("targets", targets, m)?;
    vector("loss", loss.as_any(), m)?;
    vector("mean", mean.as_any(), 1)?;
    same_stream(stream, "lse", lse)?;
    same_stream(stream, "target_logit", target_logit)?;
    same_stream(stream, "targets", targets)?;
    same_stream(stream, "loss", loss.as_any())?;
    same_stream(stream, "mean", mean.as_any())?;
    if let Some(s) = row_sum {
        vector("row_sum", s, m)?;
        same_stream(stream, "row_sum", s)?;
    }
    stream.cuda().context().bind_to_thread()?;
    let ((l, _l), (tl, _tl), (t, _t)) = (lse.read_ptr(stream), target_logit.read_ptr(stream), targets.read_ptr(stream));
    let (s, _s) = row_sum.map(|s| s.read_ptr(stream)).unzip();
    let (loss_bytes, mean_bytes) = (loss.as_any().bytes(), mean.as_any().bytes());
    let ((lo, _lo), (me, _me)) = (loss.write_ptr(stream), mean.write_ptr(stream));
    let mut args = vec![
        ("lse", l, lse.bytes(), false),
        ("target_logit", tl, target_logit.bytes(), false),
        ("targets", t, targets.bytes(), false),
        ("loss", lo, loss_bytes, true),
        ("mean", me, mean_bytes, true),
    ];
    args.extend(s.zip(row_sum).map(|(p, r)| ("row_sum", p, r.bytes(), false)));
    disjoint(&args)?;
    let LossTerms { target, sum, lse_squared } = terms;
    // SAFETY: every buffer is [M] (mean [1]), checked above; `row_sum` is
    // null exactly where its weight is 0 and the kernel does not read it.
    let code = unsafe {
        crate::ffi::coda_cross_entropy_finish(
            l as _,
            tl as _,
            s.map_or(std::ptr::null(), |p| p as _),
            t as _,
            m as i64,
            n,
            target,
            sum,
            lse_squared,
            lo as _,
            me as _,
            stream.raw(),
        )
    };
    launched(stream, "coda_cross_entropy_finish", code)
}

/// The loss gradient of each row for the mean cross-entropy: `w[m] = 1 / n_valid`
/// for rows whose target is in `[0, n_classes)`, 0 for ignored rows (`w` is `[M]`).
/// `n_classes` outside `1..=2^31 − 1` is [`Error::Arg`].
pub fn cross_entropy_row_weights(stream: &Stream, targets: &dyn TensorRef<i32>, n_classes: usize, w: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    let n = class_count(n_classes)?;
    let m = len(targets);
    if m == 0 {
        return Err(Error::arg("targets", "must have at least one row"));
    }
    vector("targets", targets, m)?;
    vector("w", w.as_any(), m)?;
    same_stream(stream, "targets", targets)?;
    same_stream(stream, "w", w.as_any())?;
    stream.cuda().context().bind_to_thread()?;
    let w_bytes = w.as_any().bytes();
    let ((t, _t), (o, _o)) = (targets.read_ptr(stream), w.write_ptr(stream));
    disjoint(&[("targets", t, targets.bytes(), false), ("w", o, w_bytes, true)])?;
    // SAFETY: both buffers are [M], checked above.
    let code = unsafe { crate::ffi::coda_cross_entropy_row_weights(t as _, m as i64, n, o as _, stream.raw()) };
    launched(stream, "coda_cross_entropy_row_weights", code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A class count the finishers' `i64` would wrap negative (ignoring every
    /// row) or that no `i32` id reaches is refused, as is zero.
    #[test]
    fn class_counts_fit_i32_ids() {
        assert_eq!(class_count(32_000).unwrap(), 32_000);
        assert_eq!(class_count(i32::MAX as usize).unwrap(), i32::MAX as i64);
        for n in [0, i32::MAX as usize + 1, 1 << 63, usize::MAX] {
            match class_count(n) {
                Err(Error::Arg { name, rule }) => assert!(name == "n_classes" && rule.contains("1..=2^31 − 1"), "{rule}"),
                other => panic!("n_classes = {n}: expected an argument error, got {other:?}"),
            }
        }
    }
}
