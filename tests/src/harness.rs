//! Verifies any compiled program on the GPU from its IR alone: random inputs
//! of every parameter kind, poisoned outputs, every output compared with the
//! f64 interpreter (the unfused bf16 path as yardstick), and a bitwise repeat.

use std::collections::HashMap;

use coda_runtime::dsl::interp::{self, Inputs, Precision};
use coda_runtime::dsl::ir::{BLayout, DType, InputKind, OperandScale, Program, Shape};
use coda_runtime::{AnyTensor, Choice, Error, Kernel, Problem, Stream, Tensor, TensorArg, bf16, e4m3, e5m2};
use crate::host::{Check, Rng, furthest_from, linear_rows, linear_rows_f32, linear_rows_fp8, sample_rows, to_f64};

/// A device tensor of any dtype, with its host copy as f64.
enum Dyn {
    Bf16(Tensor<bf16>),
    F32(Tensor<f32>),
    I32(Tensor<i32>),
    E4m3(Tensor<e4m3>),
    E5m2(Tensor<e5m2>),
}

impl Dyn {
    fn random(stream: &Stream, dtype: DType, dims: &[usize], lo: f64, hi: f64, rng: &mut Rng) -> Result<(Dyn, Vec<f64>), Error> {
        let n: usize = dims.iter().product();
        Ok(match dtype {
            DType::Bf16 => {
                let v = rng.bf16s(n, lo, hi);
                (Dyn::Bf16(Tensor::from_host(stream, &v, dims)?), to_f64(&v))
            }
            DType::F32 => {
                let v: Vec<f32> = (0..n).map(|_| rng.uniform(lo, hi) as f32).collect();
                let h = v.iter().map(|&x| x as f64).collect();
                (Dyn::F32(Tensor::from_host(stream, &v, dims)?), h)
            }
            DType::E4m3 => {
                let v: Vec<e4m3> = (0..n).map(|_| e4m3::from_f64(rng.uniform(lo, hi))).collect();
                let h = v.iter().map(|x| x.to_f64()).collect();
                (Dyn::E4m3(Tensor::from_host(stream, &v, dims)?), h)
            }
            DType::E5m2 => {
                let v: Vec<e5m2> = (0..n).map(|_| e5m2::from_f64(rng.uniform(lo, hi))).collect();
                let h = v.iter().map(|x| x.to_f64()).collect();
                (Dyn::E5m2(Tensor::from_host(stream, &v, dims)?), h)
            }
            DType::I32 => {
                // Target columns in [0, hi), every 7th the ignore index −100.
                let v: Vec<i32> =
                    (0..n).map(|i| if i % 7 == 3 { -100 } else { (rng.next_u64() % hi as u64) as i32 }).collect();
                let h = v.iter().map(|&x| x as f64).collect();
                (Dyn::I32(Tensor::from_host(stream, &v, dims)?), h)
            }
        })
    }
    fn output(stream: &Stream, dtype: DType, dims: &[usize]) -> Result<Dyn, Error> {
        let mut t = match dtype {
            DType::Bf16 => Dyn::Bf16(Tensor::zeros(stream, dims)?),
            DType::F32 => Dyn::F32(Tensor::zeros(stream, dims)?),
            DType::I32 => Dyn::I32(Tensor::zeros(stream, dims)?),
            DType::E4m3 => Dyn::E4m3(Tensor::zeros(stream, dims)?),
            DType::E5m2 => Dyn::E5m2(Tensor::zeros(stream, dims)?),
        };
        match &mut t {
            Dyn::Bf16(x) => x.poison()?,
            Dyn::F32(x) => x.poison()?,
            Dyn::I32(x) => x.poison()?,
            Dyn::E4m3(x) => x.poison()?,
            Dyn::E5m2(x) => x.poison()?,
        }
        Ok(t)
    }
    fn host(&self) -> Result<Vec<f64>, Error> {
        Ok(match self {
            Dyn::Bf16(t) => to_f64(&t.to_host()?),
            Dyn::F32(t) => t.to_host()?.iter().map(|&x| x as f64).collect(),
            Dyn::I32(t) => t.to_host()?.iter().map(|&x| x as f64).collect(),
            Dyn::E4m3(t) => t.to_host()?.iter().map(|x| x.to_f64()).collect(),
            Dyn::E5m2(t) => t.to_host()?.iter().map(|x| x.to_f64()).collect(),
        })
    }
    fn any(&self) -> &dyn AnyTensor {
        match self {
            Dyn::Bf16(t) => t,
            Dyn::F32(t) => t,
            Dyn::I32(t) => t,
            Dyn::E4m3(t) => t,
            Dyn::E5m2(t) => t,
        }
    }
    fn arg(&self) -> TensorArg<'_> {
        TensorArg::In(self.any())
    }
    fn arg_mut(&mut self) -> TensorArg<'_> {
        match self {
            Dyn::Bf16(t) => TensorArg::output(t),
            Dyn::F32(t) => TensorArg::output(t),
            Dyn::I32(t) => TensorArg::output(t),
            Dyn::E4m3(t) => TensorArg::output(t),
            Dyn::E5m2(t) => TensorArg::output(t),
        }
    }
    fn dims(&self) -> Vec<usize> {
        self.any().dims().to_vec()
    }
}

pub struct Report {
    pub rows_checked: usize,
    pub checks: Vec<Check>,
    pub repeat_bitwise: bool,
    /// Further assertions of a case beyond the criterion: (what, held).
    pub asserts: Vec<(String, bool)>,
}

impl Report {
    pub fn pass(&self) -> bool {
        self.repeat_bitwise && self.checks.iter().all(Check::pass) && self.asserts.iter().all(|(_, held)| *held)
    }
}

/// Random inputs and poisoned outputs for every parameter of a program.
pub struct Setup {
    /// The GEMM operands, of the program's types, B in its layout.
    a: Dyn,
    b: Dyn,
    /// Blockwise operand scales `a_scale`, `b_scale`, for programs that take them.
    scales: Option<(Tensor<f32>, Tensor<f32>)>,
    /// `a` `[M, K]` and `b` `[N, K]` as f64, blockwise scales folded in: `acc = a_host · b_hostᵀ`.
    a_host: Vec<f64>,
    b_host: Vec<f64>,
    tensors: Vec<Dyn>,
    host_inputs: HashMap<String, Vec<f64>>,
    pub scalars: Vec<f32>,
    /// The config and scheduler options every launch runs.
    pub choice: Choice,
}

impl Setup {
    /// Random inputs and poisoned outputs for `kernel` at `m × n × k`, in
    /// `choice` (or the one [`coda_runtime::tune::choose`] gives), which sizes the partials.
    pub fn new(
        stream: &Stream,
        kernel: &Kernel,
        program: &Program,
        choice: Option<Choice>,
        (m, n, k): (usize, usize, usize),
        rng: &mut Rng,
    ) -> Result<Setup, Error> {
        let choice = match choice {
            Some(c) => c,
            None => coda_runtime::tune::choose(kernel, stream, Problem { m, n, k })?,
        };
        let program = &Program { config: choice.config, ..program.clone() };
        let s = (3.0 / k as f64).sqrt();
        let ops = program.config.operands;
        let (a, mut a_host) = Dyn::random(stream, ops.a, &[m, k], -1.0, 1.0, rng)?;
        // Kept as [N, K] for the reference; uploaded in the kernel's B layout (8-bit operands are [N, K] only).
        let (b, mut b_host) = match program.config.b_layout {
            BLayout::Nk => Dyn::random(stream, ops.b, &[n, k], -s, s, rng)?,
            BLayout::Kn => {
                let b_host = rng.bf16s(n * k, -s, s);
                let t: Vec<bf16> = (0..k * n).map(|i| b_host[(i % n) * k + i / n]).collect();
                (Dyn::Bf16(Tensor::from_host(stream, &t, &[k, n])?), to_f64(&b_host))
            }
        };
        let scales = match ops.scale {
            OperandScale::None => None,
            OperandScale::Blockwise => {
                // a_scale [ceil(K/128), M], b_scale [ceil(N/128), ceil(K/128)], folded into the host operands.
                let [sa_dims, sb_dims] = coda_runtime::scale_dims(Problem { m, n, k });
                let sa: Vec<f32> = (0..sa_dims[0] * m).map(|_| rng.uniform(0.25, 4.0) as f32).collect();
                let sb: Vec<f32> = (0..sb_dims[0] * sb_dims[1]).map(|_| rng.uniform(0.25, 4.0) as f32).collect();
                let kb = sb_dims[1];
                for (i, x) in a_host.iter_mut().enumerate() {
                    *x *= sa[(i % k / 128) * m + i / k] as f64;
                }
                for (i, x) in b_host.iter_mut().enumerate() {
                    *x *= sb[(i / k / 128) * kb + i % k / 128] as f64;
                }
                Some((Tensor::from_host(stream, &sa, &sa_dims)?, Tensor::from_host(stream, &sb, &sb_dims)?))
            }
        };
        let mut host_inputs = HashMap::new();
        let mut tensors = vec![];
        for p in program.tensor_params() {
            let dims = choice.dims(p.shape, m, n)?;
            if p.output {
                tensors.push(Dyn::output(stream, p.dtype, &dims)?);
            } else {
                let (lo, hi) = if p.dtype == DType::I32 { (0.0, n as f64) } else { (-1.0, 1.0) };
                let (t, h) = Dyn::random(stream, p.dtype, &dims, lo, hi, rng)?;
                host_inputs.insert(p.name.clone(), h);
                tensors.push(t);
            }
        }
        let scalars = program.scalar_params().iter().map(|_| rng.uniform(0.5, 1.5) as f32).collect();
        Ok(Setup { a, b, scales, a_host, b_host, tensors, host_inputs, scalars, choice })
    }

    /// The bf16 operands, for the bf16 baselines; [`Error::Arg`] for a program with 8-bit ones.
    pub fn bf16_operands(&self) -> Result<(&Tensor<bf16>, &Tensor<bf16>), Error> {
        match (&self.a, &self.b) {
            (Dyn::Bf16(a), Dyn::Bf16(b)) => Ok((a, b)),
            _ => Err(Error::Arg { name: "a".into(), rule: "the program's operands are not bf16".into() }),
        }
    }

    /// The e4m3 operands and blockwise scales (if any), for the FP8 baselines.
    pub fn e4m3_operands(&self) -> Result<(&Tensor<e4m3>, &Tensor<e4m3>, Option<&(Tensor<f32>, Tensor<f32>)>), Error> {
        match (&self.a, &self.b) {
            (Dyn::E4m3(a), Dyn::E4m3(b)) => Ok((a, b, self.scales.as_ref())),
            _ => Err(Error::Arg { name: "a".into(), rule: "the program's operands are not e4m3".into() }),
        }
    }

    /// Replaces the f32 input `name` (e.g. realistic RoPE positions for timing).
    pub fn set_f32_input(&mut self, stream: &Stream, program: &Program, name: &str, values: &[f32]) -> Result<(), Error> {
        let i = program.tensor_params().iter().position(|p| p.name == name && !p.output && p.dtype == DType::F32);
        let i = i.ok_or_else(|| Error::Arg { name: name.into(), rule: "is not an f32 input of the program".into() })?;
        let dims = self.tensors[i].dims();
        self.tensors[i] = Dyn::F32(Tensor::from_host(stream, values, &dims)?);
        self.host_inputs.insert(name.to_string(), values.iter().map(|&v| v as f64).collect());
        Ok(())
    }

    /// One launch of `kernel` on these tensors.
    pub fn launch(&mut self, stream: &Stream, kernel: &Kernel, program: &Program) -> Result<(), Error> {
        let params = program.tensor_params();
        let mut args: Vec<TensorArg> = self
            .tensors
            .iter_mut()
            .zip(&params)
            .map(|(t, p)| if p.output { t.arg_mut() } else { t.arg() })
            .collect();
        if kernel.is_map() {
            // No accumulator: `a` and `b` go unused, the interpreter never reads `acc`.
            kernel.launch_map(stream, &self.choice, &mut args, &self.scalars)
        } else if let Some((sa, sb)) = &self.scales {
            kernel.launch_scaled(stream, &self.choice, self.a.any(), self.b.any(), sa, sb, &mut args, &self.scalars)
        } else {
            kernel.launch(stream, &self.choice, self.a.any(), self.b.any(), &mut args, &self.scalars)
        }
    }

    /// Poisons the outputs, launches, and returns every output on the host.
    pub fn run(&mut self, stream: &Stream, kernel: &Kernel, program: &Program) -> Result<Vec<Vec<f64>>, Error> {
        let params = program.tensor_params();
        for (t, p) in self.tensors.iter_mut().zip(&params) {
            if p.output {
                *t = Dyn::output(stream, p.dtype, &t.dims())?;
            }
        }
        self.launch(stream, kernel, program)?;
        self.tensors.iter().zip(&params).filter(|(_, p)| p.output).map(|(t, _)| t.host()).collect()
    }
}

/// Runs `kernel` (compiled from `program`) at `m × n × k` on fresh random
/// data, in `choice` (or the one [`coda_runtime::tune::choose`] gives).
pub fn verify(
    stream: &Stream,
    kernel: &Kernel,
    program: &Program,
    choice: Option<Choice>,
    shape: (usize, usize, usize),
    seed: u64,
) -> Result<Report, Error> {
    verify_outputs(stream, kernel, program, choice, shape, seed, |_, _| Ok(())).map(|(report, _)| report)
}

/// One output of a launch beside the f64 interpreter's, on the checked rows.
pub struct Compared {
    pub name: String,
    pub ours: Vec<f64>,
    pub reference: Vec<f64>,
}

/// As [`verify`], with `prepare` replacing inputs of the random set-up (wide
/// ranges, special values) before the launches, also returning each output
/// and its reference.
pub fn verify_outputs(
    stream: &Stream,
    kernel: &Kernel,
    program: &Program,
    choice: Option<Choice>,
    (m, n, k): (usize, usize, usize),
    seed: u64,
    prepare: impl FnOnce(&mut Setup, &mut Rng) -> Result<(), Error>,
) -> Result<(Report, Vec<Compared>), Error> {
    let mut rng = Rng::new(seed);
    let mut setup = Setup::new(stream, kernel, program, choice, (m, n, k), &mut rng)?;
    prepare(&mut setup, &mut rng)?;
    let program = &Program { config: setup.choice.config, ..program.clone() };
    let (m_pad, n_tiles) = (program.m_padded(m), program.n_tiles(n));
    let params = program.tensor_params();
    let got = setup.run(stream, kernel, program)?;
    let again = setup.run(stream, kernel, program)?;
    let repeat_bitwise = got.iter().zip(&again).all(|(x, y)| x.iter().zip(y).all(|(a, b)| a.to_bits() == b.to_bits()));
    let (a, b, host_inputs) = (&setup.a_host, &setup.b_host, &setup.host_inputs);
    let scalars = &setup.scalars;

    // Column partials reduce whole M-tiles: check every row then.
    let whole = params.iter().any(|t| matches!(t.shape, Shape::ColPartial | Shape::ColMaxPartial));
    let rows = if whole { (0..m).collect() } else { sample_rows(m, 256, &mut rng) };
    let acc = linear_rows(a, b, k, &rows);
    let mut tensors_rows = HashMap::new();
    for inp in &program.inputs {
        let h = match inp.kind {
            InputKind::Tile(_) => rows_of(&host_inputs[&inp.name], n, &rows),
            InputKind::DoubleTile(_) => rows_of(&host_inputs[&inp.name], 2 * n, &rows),
            InputKind::PerRow(_) => rows.iter().map(|&r| host_inputs[&inp.name][r]).collect(),
            InputKind::PerCol(_) => host_inputs[&inp.name].clone(),
            InputKind::Acc | InputKind::Scalar => continue,
        };
        tensors_rows.insert(inp.name.clone(), h);
    }
    let scalar_map = program.scalar_params().into_iter().zip(scalars.iter().map(|&x| x as f64)).collect();
    let inputs = Inputs { acc, tensors: tensors_rows, scalars: scalar_map };
    let reference = interp::evaluate(program, rows.len(), n, &inputs, Precision::F64).expect("the harness generated every input");
    // The unfused path's GEMM sums as the program's tensor cores do, known within a bound: the
    // path on the modelled sum and on both ends, the furthest per element. Each element's end is
    // drawn at random (its index hashed), as the tensor cores' errors are each sum's own, so that
    // a row sum does not add them up.
    let ops = program.config.operands;
    let (sums, bounds) = if ops.is_fp8() { linear_rows_fp8(a, b, k, &rows, ops) } else { linear_rows_f32(a, b, k, &rows) };
    let side = |i: usize| if (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 63 == 0 { 1.0 } else { -1.0 };
    // The three at once: at the largest checks the interpreter is most of the host's time.
    let paths = std::thread::scope(|scope| {
        [0.0, 1.0, -1.0]
            .map(|end| {
                let (sums, bounds, inputs, rows) = (&sums, &bounds, &inputs, &rows);
                scope.spawn(move || {
                    let acc = sums.iter().zip(bounds).enumerate().map(|(i, (s, d))| s + end * side(i) * d).collect();
                    let inputs = Inputs { acc, tensors: inputs.tensors.clone(), scalars: inputs.scalars.clone() };
                    interp::evaluate(program, rows.len(), n, &inputs, Precision::Bf16Unfused).expect("the harness generated every input")
                })
            })
            .map(|h| h.join().expect("the interpreter does not panic on the harness's inputs"))
    });
    let bf16_path: HashMap<String, Vec<Option<f64>>> =
        paths[0].keys().map(|o| (o.clone(), furthest_from(&reference[o], &paths.each_ref().map(|p| p[o].as_slice())))).collect();

    let (mut checks, mut compared) = (vec![], vec![]);
    for (o, g) in params.iter().filter(|p| p.output).zip(&got) {
        let ours: Vec<f64> = match o.shape {
            Shape::RowPartial | Shape::RowMaxPartial => {
                let dev: Vec<f32> = g.iter().map(|&x| x as f32).collect();
                interp::partials_from_device(&dev, m_pad, n_tiles, &rows)
            }
            Shape::LsePartial => {
                let dev: Vec<f32> = g.iter().map(|&x| x as f32).collect();
                interp::lse_partials_from_device(&dev, m_pad, n_tiles, &rows)
            }
            Shape::ColPartial | Shape::ColMaxPartial => {
                let dev: Vec<f32> = g.iter().map(|&x| x as f32).collect();
                interp::col_partials_from_device(&dev, program.n_padded(n), n)
            }
            Shape::PerRow => rows.iter().map(|&r| g[r]).collect(),
            // [ceil(N/g), M] on the device, [rows, ceil(N/g)] from the interpreter.
            Shape::PerGroup(size) => rows.iter().flat_map(|&r| (0..n.div_ceil(size)).map(move |j| g[j * m + r])).collect(),
            Shape::PerCol => g.clone(),
            Shape::HalfTile => rows_of(g, n / 2, &rows),
            Shape::DoubleTile => rows_of(g, 2 * n, &rows),
            _ => rows_of(g, n, &rows),
        };
        // Elements the GEMM's precision leaves undetermined are NaN on every side: not compared.
        let far = &bf16_path[&o.name];
        let determined = |v: &[f64]| -> Vec<f64> { v.iter().zip(far).map(|(x, f)| if f.is_some() { *x } else { f64::NAN }).collect() };
        let bf16: Vec<f64> = far.iter().map(|f| f.unwrap_or(f64::NAN)).collect();
        let mut check = Check::new(&o.name, &determined(&ours), &bf16, &determined(&reference[&o.name]));
        check.undetermined = far.iter().filter(|f| f.is_none()).count();
        checks.push(check);
        compared.push(Compared { name: o.name.clone(), ours, reference: reference[&o.name].clone() });
    }
    Ok((Report { rows_checked: rows.len(), checks, repeat_bitwise, asserts: vec![] }, compared))
}

fn rows_of(v: &[f64], width: usize, rows: &[usize]) -> Vec<f64> {
    rows.iter().flat_map(|&r| v[r * width..(r + 1) * width].iter().copied()).collect()
}

/// The LM-head loss end to end: the runtime's `linear_cross_entropy` epilogue (lse
/// partials and target logits, logits never written), then the aux kernels
/// (`lse`, per-row loss, mean over non-ignored rows), against the f64
/// interpreter on sampled rows; the mean against the f64 mean of our per-row
/// losses over all rows (the reference for all rows would need the full M × V GEMM).
/// `every_ignored`: every target is the ignore index, so the mean is over no
/// rows: NaN, as PyTorch's `cross_entropy(..., reduction="mean")` gives.
pub fn cross_entropy_case(stream: &Stream, m: usize, v: usize, k: usize, seed: u64, every_ignored: bool) -> Result<Report, Error> {
    use coda_llama::programs::linear_cross_entropy as ce;
    let mut rng = Rng::new(seed);
    let s = (3.0 / k as f64).sqrt() * 4.0; // logits of a few units: a peaked softmax
    let x = rng.bf16s(m * k, -1.0, 1.0);
    let w = rng.bf16s(v * k, -s, s);
    let r: Vec<f32> = (0..m).map(|_| rng.uniform(0.5, 1.5) as f32).collect();
    let targets: Vec<i32> =
        (0..m).map(|i| if every_ignored || i % 7 == 3 { -100 } else { (rng.next_u64() % v as u64) as i32 }).collect();
    let (tx, tw) = (Tensor::from_host(stream, &x, &[m, k])?, Tensor::from_host(stream, &w, &[v, k])?);
    let (tr, tt) = (Tensor::from_host(stream, &r, &[m])?, Tensor::from_host(stream, &targets, &[m])?);
    let mut partials = coda_runtime::LsePartials::new();
    let mut tl = Tensor::<f32>::zeros(stream, &[m])?;
    let mut lse = Tensor::<f32>::zeros(stream, &[m])?;
    let mut loss = Tensor::<f32>::zeros(stream, &[m])?;
    let mut mean = Tensor::<f32>::zeros(stream, &[1])?;
    let mut run = || -> Result<[Vec<f32>; 5], Error> {
        for t in [&mut tl, &mut lse, &mut loss, &mut mean] {
            t.poison()?;
        }
        partials.poison()?;
        ce::launch(stream, ce::Args { a: &tx, b: &tw, r: &tr, target: &tt, lse: &mut partials, target_logit: &mut tl })?;
        coda_runtime::aux::lse_from_partials(stream, &partials, &mut lse)?;
        coda_runtime::aux::cross_entropy_loss(stream, &lse, &tl, &tt, v, &mut loss, &mut mean)?;
        let p = partials.tensor().expect("written by the launch").to_host()?;
        Ok([p, tl.to_host()?, lse.to_host()?, loss.to_host()?, mean.to_host()?])
    };
    let got = run()?;
    let again = run()?;
    // The partials are laid out for the config the launch ran.
    let program = Program { config: partials.producer().expect("written above").config, ..ce::program() };
    let (m_pad, n_tiles) = (program.m_padded(m), program.n_tiles(v));
    let repeat_bitwise = got.iter().zip(&again).all(|(a, b)| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()));

    let rows = sample_rows(m, 256, &mut rng);
    let inputs = Inputs {
        acc: linear_rows(&to_f64(&x), &to_f64(&w), k, &rows),
        tensors: HashMap::from([
            ("r".to_string(), rows.iter().map(|&i| r[i] as f64).collect()),
            ("target".to_string(), rows.iter().map(|&i| targets[i] as f64).collect()),
        ]),
        scalars: HashMap::new(),
    };
    let reference = interp::evaluate(&program, rows.len(), v, &inputs, Precision::F64).expect("inputs match");
    let bf16_path = interp::evaluate(&program, rows.len(), v, &inputs, Precision::Bf16Unfused).expect("inputs match");
    let lse_of = |o: &HashMap<String, Vec<f64>>| interp::lse_from_partials(&o["lse"], n_tiles);
    let loss_of = |o: &HashMap<String, Vec<f64>>| -> Vec<f64> {
        lse_of(o).iter().zip(&o["target_logit"]).map(|(l, t)| if t.is_nan() { 0.0 } else { l - t }).collect()
    };
    let pick = |v: &[f32]| -> Vec<f64> { rows.iter().map(|&i| v[i] as f64).collect() };
    let mut checks = vec![
        Check::new("lse (partials)", &interp::lse_partials_from_device(&got[0], m_pad, n_tiles, &rows), &bf16_path["lse"], &reference["lse"]),
        Check::new("target_logit", &pick(&got[1]), &bf16_path["target_logit"], &reference["target_logit"]),
        Check::new("lse (aux)", &pick(&got[2]), &lse_of(&bf16_path), &lse_of(&reference)),
        Check::new("loss per row (aux)", &pick(&got[3]), &loss_of(&bf16_path), &loss_of(&reference)),
    ];
    let valid: Vec<usize> = (0..m).filter(|&i| targets[i] >= 0).collect();
    let mean_ours = valid.iter().map(|&i| got[3][i] as f64).sum::<f64>() / valid.len() as f64;
    // The mean's yardstick: the same sum in f32, in row order.
    let mean_f32 = valid.iter().fold(0f32, |s, &i| s + got[3][i]) / valid.len() as f32;
    checks.push(Check::new("loss mean (aux)", &[got[4][0] as f64], &[mean_f32 as f64], &[mean_ours]));
    Ok(Report { rows_checked: rows.len(), checks, repeat_bitwise, asserts: vec![] })
}
