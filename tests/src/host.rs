//! Host-side data and f64 references for checking the kernels.

use coda_runtime::bf16;
use coda_runtime::dsl::ir::Operands;

/// SplitMix64: a small deterministic generator for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// `n` values uniform in `[lo, hi)`.
    pub fn f64s(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
    pub fn bf16s(&mut self, n: usize, lo: f64, hi: f64) -> Vec<bf16> {
        (0..n).map(|_| bf16::from_f64(self.uniform(lo, hi))).collect()
    }
}

pub fn to_f64(v: &[bf16]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

/// `out[i, j] = Σ_k x[rows[i], k] · w[j, k]` in f64, for the listed rows of
/// `x` `[*, k]` and all rows of `w` `[n, k]`; rows are split across threads.
pub fn linear_rows(x: &[f64], w: &[f64], k: usize, rows: &[usize]) -> Vec<f64> {
    linear_rows_by(x, w, k, rows, |xr, wr| xr.iter().zip(wr).map(|(a, b)| a * b).sum())
}

/// As [`linear_rows`], accumulated in f32 as a bf16 GEMM does (cuBLAS, or
/// our tensor cores): the yardstick of the bf16 op-by-op path, whose error
/// near a zero of the accumulator is this absolute accumulation error, not
/// the bf16 rounding of an exact sum (which vanishes there). Returns each
/// sum (in order, in f32) and how far the tensor cores' own may lie from
/// it: one step of f32's resolution at the running magnitude per
/// instruction (16 products), their order and rounding within one not
/// being ours (session 54: `2 / acc` at an exact sum of −1.1e-5 from
/// partial sums of order 1 rounded to the other bf16 neighbour).
pub fn linear_rows_f32(x: &[f64], w: &[f64], k: usize, rows: &[usize]) -> (Vec<f64>, Vec<f64>) {
    let both = linear_rows_by(x, w, k, rows, |xr, wr| {
        let sum = fixed_point_sum(xr, wr, 16, 23);
        (sum.in_f32, sum.bound)
    });
    both.into_iter().unzip()
}

/// As [`linear_rows`], accumulated as Hopper's FP8 tensor cores do: the
/// yardstick of an FP8 program's bf16 op-by-op path (cuBLASLt's FP8 GEMM,
/// then each op). The tensor cores add in fixed point, 14 bits below the
/// largest magnitude they hold (DeepSeek-V3's technical report, §3.5.2), so a
/// sum smaller than that resolution can come out exactly 0, which a `select`
/// on the accumulator sees (bench/NOTES.md, session 53). Modelled as each
/// chunk's exact sum cut toward zero to that resolution: the chunk all of K
/// (`accum = fast`), or each k-tile (128 of K) with the chunks added in f32
/// (`promoted`, as the mainloop promotes). Returns each sum and how far the
/// tensor cores' own may lie from it: one resolution step per instruction
/// (32 products), since how the hardware rounds within one is not
/// documented and the model is not bitwise (session 54: a sum of 3.4e-5 the
/// model kept positive came out negative).
pub fn linear_rows_fp8(x: &[f64], w: &[f64], k: usize, rows: &[usize], ops: Operands) -> (Vec<f64>, Vec<f64>) {
    let chunk = if ops.accum.is_promoted() { ops.tile_k() } else { k };
    let both = linear_rows_by(x, w, k, rows, |xr, wr| {
        let (sum, bound) = xr.chunks(chunk).zip(wr.chunks(chunk)).fold((0f32, 0f64), |(s, b), (xc, wc)| {
            let sum = fixed_point_sum(xc, wc, 32, 13);
            (s + sum.fixed as f32, b + sum.bound)
        });
        (sum as f64, bound)
    });
    both.into_iter().unzip()
}

/// One dot product three ways, in one pass (independent dependency chains,
/// so it costs about what one does: the harness's hot loop).
struct Dot {
    /// In a tensor core's fixed point of `bits` fraction bits: exact (bf16
    /// and 8-bit products and their sums fit f64's mantissa), then cut toward
    /// zero to a multiple of 2^−bits of the largest power of two at or below
    /// the biggest magnitude among its products and its running sums, one per
    /// instruction of `per_instruction` products.
    fixed: f64,
    /// Added in f32, in order.
    in_f32: f64,
    /// That resolution as each instruction ends, summed.
    bound: f64,
}

fn fixed_point_sum(x: &[f64], w: &[f64], per_instruction: usize, bits: i32) -> Dot {
    // The largest power of two at or below a peak is its exponent bits alone.
    let step = 2f64.powi(-bits);
    let resolution = |peak: f64| f64::from_bits(peak.to_bits() & 0x7ff0_0000_0000_0000) * step;
    let (mut sum, mut in_f32, mut peak, mut bound) = (0f64, 0f32, 0f64, 0f64);
    for (xs, ws) in x.chunks(per_instruction).zip(w.chunks(per_instruction)) {
        for (a, b) in xs.iter().zip(ws) {
            let p = a * b;
            peak = peak.max(p.abs());
            sum += p;
            in_f32 += p as f32;
        }
        peak = peak.max(sum.abs());
        bound += resolution(peak);
    }
    let quantum = resolution(peak);
    let fixed = if quantum == 0.0 { 0.0 } else { (sum / quantum).trunc() * quantum };
    Dot { fixed, in_f32: in_f32 as f64, bound }
}

fn linear_rows_by<T: Copy + Default + Send>(
    x: &[f64],
    w: &[f64],
    k: usize,
    rows: &[usize],
    dot: impl Fn(&[f64], &[f64]) -> T + Sync,
) -> Vec<T> {
    let n = w.len() / k;
    let mut out = vec![T::default(); rows.len() * n];
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let chunk = rows.len().div_ceil(threads).max(1);
    let dot = &dot;
    std::thread::scope(|s| {
        for (rs, outs) in rows.chunks(chunk).zip(out.chunks_mut(chunk * n)) {
            s.spawn(move || {
                for (i, &r) in rs.iter().enumerate() {
                    let xr = &x[r * k..(r + 1) * k];
                    for j in 0..n {
                        outs[i * n + j] = dot(xr, &w[j * k..(j + 1) * k]);
                    }
                }
            });
        }
    });
    out
}

/// Per element, whichever of `paths` lies furthest from `reference` (by
/// [`max_abs_diff`]'s rule): the yardstick of a path known only within a
/// range, as a GEMM's sum is. `None` where the paths disagree on being
/// finite: the range spans a pole or a domain's edge, so the element is
/// not determined at the GEMM's precision and is not compared.
pub fn furthest_from(reference: &[f64], paths: &[&[f64]]) -> Vec<Option<f64>> {
    (0..reference.len())
        .map(|i| {
            if paths.iter().any(|p| p[i].is_finite() != paths[0][i].is_finite()) {
                return None;
            }
            let far = |p: &&[f64]| max_abs_diff(&p[i..=i], &reference[i..=i]);
            Some(paths.iter().max_by(|p, q| far(p).total_cmp(&far(q))).expect("at least one path")[i])
        })
        .collect()
}

/// The rows a large check compares: the first and last tiles (the ragged
/// edge) and a spread of random rows in between, sorted and distinct.
pub fn sample_rows(m: usize, count: usize, rng: &mut Rng) -> Vec<usize> {
    if m <= count {
        return (0..m).collect();
    }
    let mut rows: Vec<usize> = (0..64.min(m)).chain(m.saturating_sub(64)..m).collect();
    while rows.len() < count {
        rows.push((rng.next_u64() % m as u64) as usize);
    }
    rows.sort_unstable();
    rows.dedup();
    rows
}

/// `max |a − b|`. NaN marks an element that must stay unwritten (the
/// reference's NaN against a poisoned output): NaN on one side only counts as
/// infinitely far.
pub fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| match (x.is_nan(), y.is_nan()) {
            (true, true) => 0.0,
            (false, false) if x == y => 0.0, // equal infinities
            (false, false) => (x - y).abs(),
            _ => f64::INFINITY,
        })
        .fold(0.0, f64::max)
}

/// One output's comparison: ours and the unfused bf16 path, both against the f64 reference.
#[derive(Clone, Debug)]
pub struct Check {
    pub output: String,
    /// `max |ours − ref|`
    pub err: f64,
    /// `max |bf16 op-by-op − ref|`
    pub yardstick: f64,
    /// `max |ours − ref| / |ref|` over the finite, non-zero references (for reports).
    pub rel_err: f64,
    /// Where `err` is reached: the element's index, ours, ref, bf16 op-by-op.
    pub worst: Option<(usize, f64, f64, f64)>,
    /// Elements in all.
    pub elements: usize,
    /// Elements not compared: the GEMM's precision leaves them undetermined
    /// (finite at one end of its bound, not at another; [`furthest_from`]).
    pub undetermined: usize,
}

impl Check {
    pub fn new(output: &str, ours: &[f64], bf16_path: &[f64], reference: &[f64]) -> Check {
        Check {
            output: output.to_string(),
            err: max_abs_diff(ours, reference),
            yardstick: max_abs_diff(bf16_path, reference),
            rel_err: ours
                .iter()
                .zip(reference)
                .filter(|(_, r)| r.is_finite() && **r != 0.0)
                .map(|(o, r)| if o.is_finite() { (o - r).abs() / r.abs() } else { f64::INFINITY })
                .fold(0.0, f64::max),
            worst: (0..ours.len())
                .map(|i| (i, max_abs_diff(&ours[i..=i], &reference[i..=i])))
                .filter(|(_, e)| *e > 0.0)
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(i, _)| (i, ours[i], reference[i], bf16_path[i])),
            elements: ours.len(),
            undetermined: 0,
        }
    }
    /// The project's criterion, `err ≤ 2 · yardstick + 1e-6`, over at least
    /// one compared element.
    pub fn pass(&self) -> bool {
        self.err <= 2.0 * self.yardstick + 1e-6 && (self.elements == 0 || self.undetermined < self.elements)
    }
    /// `, N of M undetermined (not compared)` where any is, for reports.
    pub fn undetermined_note(&self) -> String {
        if self.undetermined == 0 { String::new() } else { format!(", {} of {} undetermined (not compared)", self.undetermined, self.elements) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coda_runtime::dsl::ir::{Accumulation, DType};

    /// One row against one column of `k`: the products `x[i] · w[i]`, e4m3 × e4m3.
    fn dot_fp8(x: &[f64], w: &[f64], accum: Accumulation) -> f64 {
        let ops = Operands { a: DType::E4m3, b: DType::E4m3, accum, ..Operands::BF16 };
        linear_rows_fp8(x, w, x.len(), &[0], ops).0[0]
    }

    #[test]
    fn fp8_accumulator_loses_sums_below_its_resolution() {
        // Partial sums reach 0.3125 (2⁻² ≤ 0.3125 < 2⁻¹: resolution 2⁻¹⁵); the exact sum is 2⁻¹⁷.
        let (tiny, half) = (2f64.powi(-17), 0.5);
        let mut x = vec![0.0; 256];
        let mut w = vec![0.0; 256];
        (x[0], w[0]) = (half, 0.625);
        (x[1], w[1]) = (-half, 0.625);
        (x[200], w[200]) = (tiny, 1.0);
        assert_eq!(linear_rows(&x, &w, 256, &[0])[0], tiny);
        assert_eq!(linear_rows_f32(&x, &w, 256, &[0]).0[0], tiny);
        assert_eq!(dot_fp8(&x, &w, Accumulation::Fast), 0.0);
        // Promoted: the tiny product is alone in the second 128 of K, kept exactly.
        assert_eq!(dot_fp8(&x, &w, Accumulation::Promoted), tiny);
        // In the first 128 with the large ones, it is lost again.
        (x[100], w[100], x[200]) = (tiny, 1.0, 0.0);
        assert_eq!(dot_fp8(&x, &w, Accumulation::Promoted), 0.0);
    }

    #[test]
    fn fp8_accumulator_keeps_what_its_bits_hold() {
        let x = [1.0, 1.0, -0.75, 448.0];
        let w = [0.5, 0.25, 0.125, 0.0];
        assert_eq!(dot_fp8(&x, &w, Accumulation::Fast), 0.65625);
        // 1 + 2⁻¹³ fits 14 bits below 1, 1 + 2⁻¹⁴ does not: cut toward zero, also below zero.
        let e = 2f64.powi(-13);
        assert_eq!(dot_fp8(&[1.0, e], &[1.0, 1.0], Accumulation::Fast), 1.0 + e);
        assert_eq!(dot_fp8(&[1.0, e / 2.0], &[1.0, 1.0], Accumulation::Fast), 1.0);
        assert_eq!(dot_fp8(&[-1.0, -e / 2.0], &[1.0, 1.0], Accumulation::Fast), -1.0);
    }

    #[test]
    fn bound_is_a_resolution_step_per_instruction() {
        let ops = |accum| Operands { a: DType::E4m3, b: DType::E4m3, accum, ..Operands::BF16 };
        // 288 of K, nine instructions: a product 0.5 (resolution 2⁻¹⁴) in the first, 2 (2⁻¹²) at K = 200, the seventh.
        let mut x = vec![0.0; 288];
        (x[0], x[200]) = (0.5, 2.0);
        let w = vec![1.0; 288];
        let bound = |accum| linear_rows_fp8(&x, &w, 288, &[0], ops(accum)).1[0];
        // Fast: six instructions at 2⁻¹⁴ before the 2 arrives, three at 2⁻¹².
        assert_eq!(bound(Accumulation::Fast), 6.0 * 2f64.powi(-14) + 3.0 * 2f64.powi(-12));
        // Promoted: the first 128 of K four steps at 2⁻¹⁴; the second two at 0, then two at 2⁻¹²
        // (the 2 in its third instruction); the last 32 of K none.
        assert_eq!(bound(Accumulation::Promoted), 4.0 * 2f64.powi(-14) + 2.0 * 2f64.powi(-12));
        // bf16 operands: 18 instructions of 16 products in f32, twelve at 0.5's ulp 2⁻²⁴, six at 2.5's 2⁻²².
        assert_eq!(linear_rows_f32(&x, &w, 288, &[0]).1[0], 12.0 * 2f64.powi(-24) + 6.0 * 2f64.powi(-22));
    }

    #[test]
    fn furthest_from_picks_per_element() {
        let reference = [1.0, 2.0, 3.0, f64::NAN];
        let (p, q) = ([1.5, 2.0, f64::INFINITY, f64::NAN], [0.0, 2.25, 3.0, f64::NAN]);
        let far = furthest_from(&reference, &[&p, &q]);
        assert_eq!(far[..2], [Some(0.0), Some(2.25)]);
        assert_eq!(far[2], None, "finite at one end, infinite at the other: undetermined");
        assert!(far[3].is_some_and(f64::is_nan), "NaN at every end (an unwritten element) is compared");
    }

    #[test]
    fn a_check_with_nothing_compared_fails() {
        let nan = [f64::NAN; 3];
        let mut check = Check::new("v", &nan, &nan, &nan);
        assert!(check.pass(), "NaN where the reference is NaN: equal");
        check.undetermined = 2;
        assert!(check.pass() && check.undetermined_note() == ", 2 of 3 undetermined (not compared)");
        check.undetermined = 3;
        assert!(!check.pass(), "every element undetermined: nothing was compared");
    }
}
