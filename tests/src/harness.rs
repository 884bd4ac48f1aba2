//! Verifies any compiled program on the GPU from its IR alone: random inputs
//! of every parameter kind, poisoned outputs, every output compared with the
//! f64 interpreter (the unfused bf16 path as yardstick), and a bitwise repeat.

use std::collections::HashMap;

use coda_runtime::dsl::interp::{self, Inputs, Precision};
use coda_runtime::dsl::ir::{DType, InputKind, Program, Shape};
use coda_runtime::{Error, Kernel, Stream, Tensor, TensorArg, bf16};
use llama_norm::host::{Check, Rng, linear_rows, sample_rows, to_f64};

/// A device tensor of either float dtype, with its host copy as f64.
enum Dyn {
    Bf16(Tensor<bf16>),
    F32(Tensor<f32>),
}

impl Dyn {
    fn random(stream: &Stream, dtype: DType, dims: &[usize], lo: f64, hi: f64, rng: &mut Rng) -> Result<(Dyn, Vec<f64>), Error> {
        let n: usize = dims.iter().product();
        Ok(match dtype {
            DType::Bf16 => {
                let v = rng.bf16s(n, lo, hi);
                (Dyn::Bf16(Tensor::from_host(stream, &v, dims)?), to_f64(&v))
            }
            _ => {
                let v: Vec<f32> = (0..n).map(|_| rng.uniform(lo, hi) as f32).collect();
                let h = v.iter().map(|&x| x as f64).collect();
                (Dyn::F32(Tensor::from_host(stream, &v, dims)?), h)
            }
        })
    }
    fn output(stream: &Stream, dtype: DType, dims: &[usize]) -> Result<Dyn, Error> {
        let mut t = match dtype {
            DType::Bf16 => Dyn::Bf16(Tensor::zeros(stream, dims)?),
            _ => Dyn::F32(Tensor::zeros(stream, dims)?),
        };
        match &mut t {
            Dyn::Bf16(x) => x.poison(stream)?,
            Dyn::F32(x) => x.poison(stream)?,
        }
        Ok(t)
    }
    fn host(&self, stream: &Stream) -> Result<Vec<f64>, Error> {
        Ok(match self {
            Dyn::Bf16(t) => to_f64(&t.to_host(stream)?),
            Dyn::F32(t) => t.to_host(stream)?.iter().map(|&x| x as f64).collect(),
        })
    }
    fn arg(&self) -> TensorArg<'_> {
        match self {
            Dyn::Bf16(t) => TensorArg::input(t),
            Dyn::F32(t) => TensorArg::input(t),
        }
    }
    fn arg_mut(&mut self) -> TensorArg<'_> {
        match self {
            Dyn::Bf16(t) => TensorArg::output(t),
            Dyn::F32(t) => TensorArg::output(t),
        }
    }
}

pub struct Report {
    pub rows_checked: usize,
    pub checks: Vec<Check>,
    pub repeat_bitwise: bool,
}

impl Report {
    pub fn pass(&self) -> bool {
        self.repeat_bitwise && self.checks.iter().all(Check::pass)
    }
}

/// Runs `kernel` (compiled from `program`) at `m × n × k` on fresh random data.
pub fn verify(stream: &Stream, kernel: &Kernel, program: &Program, m: usize, n: usize, k: usize, seed: u64) -> Result<Report, Error> {
    let mut rng = Rng::new(seed);
    let s = (3.0 / k as f64).sqrt();
    let a = rng.bf16s(m * k, -1.0, 1.0);
    let b = rng.bf16s(n * k, -s, s);
    let (ta, tb) = (Tensor::from_host(stream, &a, &[m, k])?, Tensor::from_host(stream, &b, &[n, k])?);
    let (m_pad, n_tiles) = (program.m_padded(m), program.n_tiles(n));

    let mut host_inputs: HashMap<String, Vec<f64>> = HashMap::new();
    let mut tensors = vec![];
    for p in program.tensor_params() {
        let dims = match p.shape {
            Shape::Tile => vec![m, n],
            Shape::HalfTile => vec![m, n / 2],
            Shape::DoubleTile => vec![m, 2 * n],
            Shape::PerRow => vec![m],
            Shape::PerCol => vec![n],
            Shape::RowPartial => vec![n_tiles, m_pad],
        };
        if p.output {
            tensors.push(Dyn::output(stream, p.dtype, &dims)?);
        } else {
            let (t, h) = Dyn::random(stream, p.dtype, &dims, -1.0, 1.0, &mut rng)?;
            host_inputs.insert(p.name.clone(), h);
            tensors.push(t);
        }
    }
    let scalars: Vec<f32> = program.scalar_params().iter().map(|_| rng.uniform(0.5, 1.5) as f32).collect();
    let params = program.tensor_params();
    let run = |tensors: &mut Vec<Dyn>| -> Result<Vec<Vec<f64>>, Error> {
        for (t, p) in tensors.iter_mut().zip(&params) {
            if p.output {
                *t = Dyn::output(stream, p.dtype, &t_dims(t))?;
            }
        }
        let args: Vec<TensorArg> = tensors
            .iter_mut()
            .zip(&params)
            .map(|(t, p)| if p.output { t.arg_mut() } else { t.arg() })
            .collect();
        kernel.launch(stream, &ta, &tb, &args, &scalars)?;
        drop(args);
        tensors.iter().zip(&params).filter(|(_, p)| p.output).map(|(t, _)| t.host(stream)).collect()
    };
    let got = run(&mut tensors)?;
    let again = run(&mut tensors)?;
    let repeat_bitwise = got.iter().zip(&again).all(|(x, y)| x.iter().zip(y).all(|(a, b)| a.to_bits() == b.to_bits()));

    let rows = sample_rows(m, 256, &mut rng);
    let acc = linear_rows(&to_f64(&a), &to_f64(&b), k, &rows);
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
    let bf16_path = interp::evaluate(program, rows.len(), n, &inputs, Precision::Bf16Unfused).expect("the harness generated every input");

    let mut checks = vec![];
    for (o, g) in params.iter().filter(|p| p.output).zip(&got) {
        let ours: Vec<f64> = match o.shape {
            Shape::RowPartial => {
                let dev: Vec<f32> = g.iter().map(|&x| x as f32).collect();
                interp::partials_from_device(&dev, m_pad, n_tiles, &rows)
            }
            Shape::HalfTile => rows_of(g, n / 2, &rows),
            Shape::DoubleTile => rows_of(g, 2 * n, &rows),
            _ => rows_of(g, n, &rows),
        };
        checks.push(Check::new(&o.name, &ours, &bf16_path[&o.name], &reference[&o.name]));
    }
    Ok(Report { rows_checked: rows.len(), checks, repeat_bitwise })
}

fn rows_of(v: &[f64], width: usize, rows: &[usize]) -> Vec<f64> {
    rows.iter().flat_map(|&r| v[r * width..(r + 1) * width].iter().copied()).collect()
}

fn t_dims(t: &Dyn) -> Vec<usize> {
    match t {
        Dyn::Bf16(x) => x.shape().to_vec(),
        Dyn::F32(x) => x.shape().to_vec(),
    }
}
