//! GPU tests: need an sm_90a device (H100/H200). Where there is none (CI),
//! they print why and pass without running. Run them on the GPU machine with
//! the built test binary: `gpu [--quick | --sanitize] [--only NAME-PART]... [--skip NAME-PART]...`.

use coda_llama::{BlockConfig, HeadLoss};
use coda_llama::programs as llama;
use coda_runtime::{Choice, Error, Raster, RowPartials, Stream, Tensor, bf16};
use coda_tests::host::Rng;
use coda_tests::programs::{self as kit, dswiglu, linear, two_partials};
use coda_tests::{backward, block, edges, harness, stress};

struct Outcome {
    name: String,
    pass: bool,
}

/// Runs the cases (those whose name contains one of the `--only` texts, if any,
/// and none of the `--skip` texts) on `stream`, printing each result as it
/// completes: an error is a failed case, not an abort. Without a device each
/// selected case is counted as skipped instead.
struct Runner {
    stream: Result<Stream, Error>,
    only: Vec<String>,
    skip: Vec<String>,
    outcomes: Vec<Outcome>,
    skipped: usize,
}

impl Runner {
    fn outcome(&mut self, name: String, f: impl FnOnce(&Stream) -> Result<(bool, String), Error>) {
        let has = |parts: &[String]| parts.iter().any(|p| name.contains(p.as_str()));
        if (!self.only.is_empty() && !has(&self.only)) || has(&self.skip) {
            return;
        }
        let Ok(stream) = &self.stream else {
            self.skipped += 1;
            return;
        };
        let t = std::time::Instant::now();
        let (pass, detail) = f(stream).unwrap_or_else(|e| (false, format!("    error: {e}\n")));
        println!("{} {name} ({:.1} s)\n{detail}", if pass { "PASS" } else { "FAIL" }, t.elapsed().as_secs_f64());
        self.outcomes.push(Outcome { name, pass });
    }

    /// As [`Runner::outcome`], not run (and not counted) when `excluded`.
    fn outcome_unless(&mut self, excluded: bool, name: String, f: impl FnOnce(&Stream) -> Result<(bool, String), Error>) {
        if !excluded {
            self.outcome(name, f);
        }
    }

    fn case(&mut self, name: String, f: impl FnOnce(&Stream) -> Result<harness::Report, Error>) {
        self.outcome(name, |stream| {
            let r = f(stream)?;
            let mut detail = format!("rows checked {}, repeat bitwise {}\n", r.rows_checked, r.repeat_bitwise);
            for c in &r.checks {
                let verdict = if c.pass() { "ok" } else { "FAIL" };
                detail += &format!(
                    "    {:<36} err {:.3e} (rel {:.1e})  bf16 err {:.3e}{}  {verdict}\n",
                    c.output,
                    c.err,
                    c.rel_err,
                    c.yardstick,
                    c.undetermined_note()
                );
                if let (false, Some((i, ours, reference, bf16_path))) = (c.pass(), c.worst) {
                    detail += &format!("      worst at element {i}: ours {ours:e}, f64 {reference:e}, bf16 path {bf16_path:e}\n");
                }
            }
            for (what, held) in &r.asserts {
                detail += &format!("    {what}  {}\n", if *held { "ok" } else { "FAIL" });
            }
            Ok((r.pass(), detail))
        });
    }
}

/// A bad argument is refused before anything is launched: the output stays poisoned.
fn bad_input_launches_nothing(stream: &Stream) -> Result<(bool, String), Error> {
    let (m, n, k) = (256, 256, 260); // K % 8 != 0
    let x = Tensor::<bf16>::zeros(stream, &[m, k])?;
    let w = Tensor::<bf16>::zeros(stream, &[n, k])?;
    let mut y = Tensor::<bf16>::zeros(stream, &[m, n])?;
    y.poison()?;
    let err = linear::launch(stream, linear::Args { a: &x, b: &w, y: &mut y }).expect_err("K = 260 must be refused");
    let untouched = y.to_host()?.iter().all(|v| v.to_bits() == 0xFFFF);
    let pass = matches!(&err, Error::Arg { name, .. } if name == "a") && untouched;
    Ok((pass, format!("    error: {err}; output untouched: {untouched}\n")))
}

/// A TMA descriptor the driver refuses makes the launcher return an error
/// and launch nothing: the raw C ABI of `linear` (bypassing the checks that
/// refuse this first) with an A operand 2 bytes off 16-byte alignment.
fn tma_failure_is_an_error(stream: &Stream) -> Result<(bool, String), Error> {
    use coda_runtime::ffi::GemmLaunch;
    use cudarc::driver::DevicePtr;
    unsafe extern "C" {
        fn coda_coda_tests_0_1_0_linear__pp_128x128_c1x2_run(p: *mut GemmLaunch) -> i32;
        fn coda_coda_tests_0_1_0_linear__pp_128x128_c1x2_workspace(p: *mut GemmLaunch, bytes: *mut usize) -> i32;
    }
    let (m, n, k) = (256usize, 256usize, 256usize);
    let a = Tensor::<bf16>::zeros(stream, &[m * k + 8])?;
    let b = Tensor::<bf16>::zeros(stream, &[n, k])?;
    let mut y = Tensor::<bf16>::zeros(stream, &[m, n])?;
    y.poison()?;
    let cs = stream.cuda();
    let (pa, _ga) = a.slice().device_ptr(cs);
    let (pb, _gb) = b.slice().device_ptr(cs);
    let (py, _gy) = y.slice().device_ptr(cs);
    let tensors = [py as *mut std::ffi::c_void];
    let mut launch = GemmLaunch {
        m: m as i64,
        n: n as i64,
        k: k as i64,
        a: (pa + 2) as *const std::ffi::c_void,
        b: pb as *const std::ffi::c_void,
        a_scale: std::ptr::null(),
        b_scale: std::ptr::null(),
        tensors: tensors.as_ptr(),
        scalars: std::ptr::null(),
        workspace: std::ptr::null_mut(),
        workspace_bytes: 0,
        device_id: stream.ordinal() as i32,
        sm_count: stream.sm_count(),
        swizzle: 1,
        raster: 0,
        stream: cs.cu_stream() as *mut std::ffi::c_void,
        message: [0; 256],
    };
    cs.context().bind_to_thread()?;
    let mut need = 0usize;
    // SAFETY: every pointer is a live device buffer of this stream (A's offset
    // stays inside it), the workspace is sized by the launcher's own answer.
    let sized = unsafe { coda_coda_tests_0_1_0_linear__pp_128x128_c1x2_workspace(&mut launch, &mut need) };
    let ws = Tensor::<f32>::zeros(stream, &[need.div_ceil(4).max(1)])?;
    let (pw, _gw) = ws.slice().device_ptr(cs);
    launch.workspace = pw as *mut std::ffi::c_void;
    launch.workspace_bytes = need;
    let code = unsafe { coda_coda_tests_0_1_0_linear__pp_128x128_c1x2_run(&mut launch) };
    drop((_ga, _gb, _gy, _gw));
    let untouched = y.to_host()?.iter().all(|v| v.to_bits() == 0xFFFF);
    let message = launch.message();
    let pass = sized == 0 && code == 2 && message.contains("TMA descriptor creation") && untouched;
    Ok((pass, format!("    code {code}: {message}; output untouched: {untouched}\n")))
}

/// Public functions given bad input (each once a panic, a hang or a wrong
/// answer) return an error naming the argument, and launch nothing.
fn bad_inputs_are_errors(stream: &Stream) -> Result<(bool, String), Error> {
    use coda_llama::{BlockState, HeadBackwardState, HeadState, HeadWeights};
    let mut detail = String::new();
    let mut pass = true;
    let mut expect = |what: &str, arg: &str, r: Result<(), Error>| {
        let ok = matches!(&r, Err(Error::Arg { name, .. }) if name == arg);
        pass &= ok;
        detail += &format!("    {what}: {}\n", match r {
            Err(e) => e.to_string(),
            Ok(()) => "accepted".into(),
        });
    };
    let (m, n, k) = (256, 256, 256);
    let x = Tensor::<bf16>::zeros(stream, &[m, k])?;
    let w = Tensor::<bf16>::zeros(stream, &[n, k])?;
    let mut y = Tensor::<bf16>::zeros(stream, &[m, n])?;
    y.poison()?;
    let bad_swizzle = Choice { swizzle: 3, ..Choice::own(&linear::KERNEL) };
    expect("swizzle 3", "choice", linear::launch_as(stream, &bad_swizzle, linear::Args { a: &x, b: &w, y: &mut y }));
    let untouched = y.to_host()?.iter().all(|v| v.to_bits() == 0xFFFF);
    let mut config = Choice::own(&two_partials::KERNEL).config;
    config.tile_n = 0;
    let empty_tile = Choice { config, ..Choice::own(&two_partials::KERNEL) };
    let (res, other) = (Tensor::<bf16>::zeros(stream, &[m, n])?, Tensor::<bf16>::zeros(stream, &[m, n])?);
    let (mut g, mut s1, mut s2) = (Tensor::<bf16>::zeros(stream, &[m, n])?, RowPartials::new(), RowPartials::new());
    let args = two_partials::Args { a: &x, b: &w, res: &res, other: &other, g: &mut g, sum_g: &mut s1, sum_log: &mut s2, eps: 1e-3 };
    expect("a choice with an empty tile", two_partials::KERNEL.name(), two_partials::launch_as(stream, &empty_tile, args));
    let lse = Tensor::<f32>::zeros(stream, &[m])?;
    let targets = Tensor::<i32>::zeros(stream, &[m])?;
    let (mut loss, mut mean) = (Tensor::<f32>::zeros(stream, &[m])?, Tensor::<f32>::zeros(stream, &[1])?);
    for classes in [0, usize::MAX] {
        let r = coda_runtime::aux::cross_entropy_loss(stream, &lse, &lse, &targets, classes, &mut loss, &mut mean);
        expect(&format!("cross_entropy_loss with {classes} classes"), "n_classes", r);
    }
    let mut none: [coda_runtime::bench::Launch<'_>; 0] = [];
    let r = coda_runtime::bench::interleaved(stream, std::time::Duration::ZERO, 0, 1, &mut none).map(|_| ());
    expect("bench::interleaved with 0 samples", "samples", r);
    let c = block::config(256, 512);
    expect("BlockState with 0 tokens", "tokens", BlockState::new(stream, &c, 0).map(|_| ()));
    let mut head = HeadWeights::new(Tensor::zeros(stream, &[256])?, Tensor::zeros(stream, &[4096, 256])?, 1e-5)?;
    expect("HeadState with 0 tokens", "tokens", HeadState::new(stream, &head, 0).map(|_| ()));
    expect("HeadBackwardState with 0 tokens", "tokens", HeadBackwardState::new(stream, &head, 0, 256).map(|_| ()));
    expect("HeadBackwardState with usize::MAX tokens", "tokens", HeadBackwardState::new(stream, &head, usize::MAX, 256).map(|_| ()));
    expect("HeadBackwardState with chunks of 100 rows", "chunk_rows", HeadBackwardState::new(stream, &head, 1000, 100).map(|_| ()));
    // Chunk buffers given from elsewhere: 1000 tokens in chunks of 256 take [256, V], [256, V], [256, d].
    let blas = std::sync::Arc::new(coda_llama::blas::Cublas::new(stream)?);
    let part = |rows: usize, cols: usize| Tensor::<bf16>::zeros(stream, &[rows, cols]);
    let given = |logits, dlogits, xg| {
        HeadBackwardState::<coda_llama::Owned>::from_parts(stream, &head, 1000, 256, blas.clone(), logits, dlogits, xg).map(|_| ())
    };
    expect("HeadBackwardState::from_parts, logits of 255 rows", "logits", given(part(255, 4096)?, part(256, 4096)?, part(256, 256)?));
    expect("HeadBackwardState::from_parts, dlogits of 4095 columns", "dlogits", given(part(256, 4096)?, part(256, 4095)?, part(256, 256)?));
    expect("HeadBackwardState::from_parts, xg of V columns", "xg", given(part(256, 4096)?, part(256, 4096)?, part(256, 4096)?));
    // QK-norm's parts: weights, state and gradients given together, and its aux launches' rules.
    let qk = block::config_qk_norm(256, 512);
    let mut rng = Rng::new(9);
    let mut hw = block::random_weights(&qk, &mut rng)?;
    let qk_w = coda_llama::BlockWeights::upload(stream, qk, &hw)?;
    let mut qk_state = BlockState::new(stream, &qk, 300)?;
    let inp = block::random_inputs(&qk, 300, &mut rng);
    let attn = Tensor::from_host(stream, &inp.attn, &[300, qk.attn_width()])?;
    let x0 = Tensor::from_host(stream, &inp.x0, &[300, qk.hidden])?;
    let pos = Tensor::from_host(stream, &inp.pos, &[300])?;
    hw.qk_norm = None;
    expect("QK-norm config, weights without its norms", "qk_norm", coda_llama::BlockWeights::upload(stream, qk, &hw).map(|_| ()));
    let plain_w = coda_llama::BlockWeights::upload(stream, c, &block::random_weights(&c, &mut rng)?)?;
    let mut qk_in_plain = BlockState::new(stream, &qk, 300)?;
    expect("plain weights, a QK-norm state", "s", coda_llama::block_forward(stream, &plain_w, coda_llama::ForwardInputs { attn: &attn, x0: &x0, pos: &pos }, &mut qk_in_plain));
    coda_llama::block_forward(stream, &qk_w, coda_llama::ForwardInputs { attn: &attn, x0: &x0, pos: &pos }, &mut qk_state)?;
    let (mut bs, mut g) = (coda_llama::BackwardState::new(stream, &qk, 300)?, coda_llama::BlockGrads::new(stream, &qk, 300)?);
    let (dx2, dqkv) = (Tensor::zeros(stream, &[300, qk.hidden])?, Tensor::zeros(stream, &[300, qk.qkv_width()])?);
    coda_llama::block_backward(stream, &qk_w, &qk_state, coda_llama::BackwardInputs { attn: &attn, pos: &pos, dx2: &dx2, dqkv: &dqkv }, &mut bs, &mut g)?;
    let mut out = Tensor::<f32>::zeros(stream, &[128])?;
    let past_the_end = coda_runtime::aux::col_sums_grouped(stream, &bs.qk_gamma_partials, qk.qkv_width() - 64, 1, &mut out);
    expect("col_sums_grouped past the last column", "groups", past_the_end);
    let (v128, mut short) = (Tensor::<bf16>::zeros(stream, &[128])?, Tensor::<bf16>::zeros(stream, &[255])?);
    expect("repeat_two into too short an output", "out", coda_runtime::aux::repeat_two(stream, &v128, 1, &v128, 1, &mut short));
    let matrix = Tensor::<bf16>::zeros(stream, &[1, 128])?;
    expect("repeat_two of a matrix", "a", coda_runtime::aux::repeat_two(stream, &matrix, 1, &v128, 1, &mut short));
    // The backward checks every argument before its first launch (session
    // 38): a short dqkv is refused by its name and nothing is written.
    g.dgamma2.poison()?;
    let short_dqkv = Tensor::<bf16>::zeros(stream, &[300, qk.qkv_width() - 8])?;
    let r = coda_llama::block_backward(stream, &qk_w, &qk_state, coda_llama::BackwardInputs { attn: &attn, pos: &pos, dx2: &dx2, dqkv: &short_dqkv }, &mut bs, &mut g);
    expect("block_backward with dqkv 8 columns short", "dqkv", r);
    let nothing_written = g.dgamma2.to_host()?.iter().all(|v| v.to_bits() == u32::MAX);
    // A head backward under weights whose loss changed since the forward.
    let (hx, ht) = (Tensor::<bf16>::zeros(stream, &[300, 256])?, Tensor::<i32>::zeros(stream, &[300])?);
    let mut hs = HeadState::new(stream, &head, 300)?;
    coda_llama::head_forward(stream, &head, &hx, &ht, &mut hs)?;
    head.loss.z_loss = 0.1;
    let (mut hbs, mut hg) = (HeadBackwardState::new(stream, &head, 300, 256)?, coda_llama::HeadGrads::new(stream, &head, 300)?);
    expect("head_backward after the loss changed", "fwd", coda_llama::head_backward(stream, &head, &hx, &ht, &hs, &mut hbs, &mut hg));
    head.eps = f32::NAN;
    expect("head_forward with eps set to NaN after construction", "eps", coda_llama::head_forward(stream, &head, &hx, &ht, &mut hs));
    // Frozen weights: their gradient GEMMs are not run, and every other
    // gradient is the full backward's bit for bit.
    let dx2 = Tensor::from_host(stream, &rng.bf16s(300 * qk.hidden, -1.0, 1.0), &[300, qk.hidden])?;
    let dqkv = Tensor::from_host(stream, &rng.bf16s(300 * qk.qkv_width(), -1.0, 1.0), &[300, qk.qkv_width()])?;
    coda_llama::block_backward(stream, &qk_w, &qk_state, coda_llama::BackwardInputs { attn: &attn, pos: &pos, dx2: &dx2, dqkv: &dqkv }, &mut bs, &mut g)?;
    let mut frozen = coda_llama::BlockGrads::new(stream, &qk, 300)?;
    (frozen.dwo, frozen.dw_down) = (coda_llama::WeightGrad::Frozen, coda_llama::WeightGrad::Frozen);
    let before = stream.launches().blas;
    coda_llama::block_backward(stream, &qk_w, &qk_state, coda_llama::BackwardInputs { attn: &attn, pos: &pos, dx2: &dx2, dqkv: &dqkv }, &mut bs, &mut frozen)?;
    let blas_launches = stream.launches().blas - before;
    let bits = |t: &Tensor<bf16>| t.to_host().map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    let fbits = |t: &Tensor<f32>| t.to_host().map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    // `BlockGrads::new` keeps the weights' gradients in f32.
    let f32_of = |w: &coda_llama::WeightGrad<Tensor<bf16>, Tensor<f32>>| match w {
        coda_llama::WeightGrad::F32(t) => t.to_host(),
        _ => Ok(vec![]),
    };
    let fg = |w| f32_of(w).map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    let same = bits(&frozen.dx0)? == bits(&g.dx0)?
        && bits(&frozen.dattn)? == bits(&g.dattn)?
        && fbits(&frozen.dgamma1)? == fbits(&g.dgamma1)?
        && fg(&frozen.dw_qkv)? == fg(&g.dw_qkv)?
        && fg(&frozen.dw_gate_up)? == fg(&g.dw_gate_up)?;
    let frozen_ok = blas_launches == 2 && same;
    detail += &format!("    frozen wo and down: {blas_launches} cuBLAS launches (2 expected), other gradients bit for bit: {same}\n");
    // Accumulation: weights' gradients prefilled with random values p come
    // back as p + g (the column sums' bit for bit, cuBLAS's `beta = 1`
    // within 1e-5 of the gradient's largest entry and one rounding of the
    // sum); dx0 and dattn written.
    let mut acc = coda_llama::BlockGrads::new(stream, &qk, 300)?;
    let mut prefilled: Vec<Vec<f32>> = vec![];
    {
        let mut fill = |t: &mut Tensor<f32>| -> Result<(), Error> {
            let p: Vec<f32> = (0..t.len()).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
            *t = Tensor::from_host(stream, &p, &t.shape().to_vec())?;
            prefilled.push(p);
            Ok(())
        };
        let n = acc.qk_norm.as_mut().expect("a QK-norm config");
        fill(&mut n.q)?;
        fill(&mut n.k)?;
        fill(&mut acc.dgamma1)?;
        fill(&mut acc.dgamma2)?;
        for w in [&mut acc.dwo, &mut acc.dw_gate_up, &mut acc.dw_down, &mut acc.dw_qkv] {
            let coda_llama::WeightGrad::F32(t) = w else { unreachable!("BlockGrads::new keeps f32 weight gradients") };
            fill(t)?;
        }
    }
    acc.accumulate = true;
    coda_llama::block_backward(stream, &qk_w, &qk_state, coda_llama::BackwardInputs { attn: &attn, pos: &pos, dx2: &dx2, dqkv: &dqkv }, &mut bs, &mut acc)?;
    let (gn, an) = (g.qk_norm.as_ref().expect("QK-norm"), acc.qk_norm.as_ref().expect("QK-norm"));
    let sums = [(&gn.q, &an.q), (&gn.k, &an.k), (&g.dgamma1, &acc.dgamma1), (&g.dgamma2, &acc.dgamma2)];
    let mut sums_exact = true;
    for (i, (fresh, added)) in sums.into_iter().enumerate() {
        let (fresh, added) = (fresh.to_host()?, added.to_host()?);
        sums_exact &= fresh.iter().zip(&prefilled[i]).zip(&added).all(|((f, p), a)| (p + f).to_bits() == a.to_bits());
    }
    let mut weights_worst = 0.0f64;
    for (i, (fresh, added)) in [(&g.dwo, &acc.dwo), (&g.dw_gate_up, &acc.dw_gate_up), (&g.dw_down, &acc.dw_down), (&g.dw_qkv, &acc.dw_qkv)].into_iter().enumerate() {
        let (fresh, added) = (f32_of(fresh)?, f32_of(added)?);
        let big = fresh.iter().fold(0.0f64, |m, v| m.max(v.abs() as f64));
        // Within 1e-5 of the gradient's largest entry, plus the sum's own f32 rounding.
        let worst = fresh.iter().zip(&prefilled[4 + i]).zip(&added).fold(0.0f64, |m, ((f, p), a)| {
            let want = *p as f64 + *f as f64;
            m.max((*a as f64 - want).abs() / (1e-5 * big + want.abs() * f32::EPSILON as f64))
        });
        weights_worst = weights_worst.max(worst);
    }
    let written = bits(&acc.dx0)? == bits(&g.dx0)? && bits(&acc.dattn)? == bits(&g.dattn)?;
    let accumulate_ok = sums_exact && weights_worst <= 1.0 && written;
    detail += &format!(
        "    accumulate: norm weights' p + g bit for bit: {sums_exact}; matrices' worst |acc − (p + g)| / (1e-5·max|g| + ε|p + g|) {weights_worst:.2} (≤ 1); dx0, dattn written: {written}\n"
    );
    detail += &format!("    output untouched after the refused swizzle: {untouched}; dγ2 untouched after the refused backward: {nothing_written}\n");
    Ok((pass && untouched && nothing_written && frozen_ok && accumulate_ok, detail))
}

/// Work on another stream that reads a launch's output is ordered after the
/// launch: cudarc's guards record the write after the kernel is enqueued.
/// (Before, the 8192 × 8192 output read at once through a second stream came
/// back with 1,048,576 unwritten elements.)
fn other_streams_wait_for_launches(stream: &Stream) -> Result<(bool, String), Error> {
    let (m, n, k) = (8192, 8192, 1024);
    let mut rng = Rng::new(31);
    let x = Tensor::from_host(stream, &rng.bf16s(m * k, -1.0, 1.0), &[m, k])?;
    let w = Tensor::from_host(stream, &rng.bf16s(n * k, -0.1, 0.1), &[n, k])?;
    let mut y = Tensor::<bf16>::zeros(stream, &[m, n])?;
    let other = Stream::new(stream.ordinal())?;
    let mut unwritten = 0;
    for _ in 0..3 {
        y.poison()?;
        linear::launch(stream, linear::Args { a: &x, b: &w, y: &mut y })?;
        let seen = other.cuda().clone_dtoh(y.slice())?;
        unwritten += seen.iter().filter(|v| v.to_bits() == 0xFFFF).count();
    }
    Ok((unwritten == 0, format!("    unwritten elements seen by the second stream in 3 tries: {unwritten}\n")))
}

/// Partials belong to the program that first wrote them: a second program
/// writing the same object is refused, naming the argument and both programs.
fn partials_have_one_producer(stream: &Stream) -> Result<(bool, String), Error> {
    let (m, n, k) = (256, 256, 256);
    let mut rng = Rng::new(32);
    let t = |rng: &mut Rng, r, c| Tensor::from_host(stream, &rng.bf16s(r * c, -1.0, 1.0), &[r, c]);
    let (x, w, z1, res, other) = (t(&mut rng, m, k)?, t(&mut rng, n, k)?, t(&mut rng, m, 2 * n)?, t(&mut rng, m, n)?, t(&mut rng, m, n)?);
    let (mut y1, mut dz1, mut g) = (Tensor::zeros(stream, &[m, n])?, Tensor::zeros(stream, &[m, 2 * n])?, Tensor::zeros(stream, &[m, n])?);
    let (mut s1, mut spare) = (RowPartials::new(), RowPartials::new());
    dswiglu::launch(stream, dswiglu::Args { a: &x, b: &w, z1: &z1, y1: &mut y1, dz1: &mut dz1, s1: &mut s1 })?;
    let err = two_partials::launch(
        stream,
        two_partials::Args { a: &x, b: &w, res: &res, other: &other, g: &mut g, sum_g: &mut s1, sum_log: &mut spare, eps: 1e-3 },
    )
    .expect_err("another program's partials must be refused");
    let pass = matches!(&err, Error::Arg { name, rule } if name == "sum_g" && rule.contains("coda-tests::dswiglu"));
    Ok((pass, format!("    error: {err}\n")))
}

/// The maxima finishers against the host's maxima of the same device
/// partials (a maximum rounds nothing, so exactly), at a ragged shape whose
/// last tiles are part padding; and their refusals, by name. (The partials
/// themselves are checked against f64 with the other programs.)
fn maxima_finish(stream: &Stream) -> Result<(bool, String), Error> {
    use coda_runtime::{ColMaxPartials, RowMaxPartials, aux, e4m3};
    use kit::fp8_delayed_scaling as fds;
    // N in whole 16-byte rows of e4m3, ragged against every tile.
    let (m, n, k) = (1000, 1008, 264);
    let mut rng = Rng::new(34);
    let a = Tensor::from_host(stream, &rng.bf16s(m * k, -1.0, 1.0), &[m, k])?;
    let b = Tensor::from_host(stream, &rng.bf16s(n * k, -1.0, 1.0), &[n, k])?;
    let bias: Vec<f32> = rng.f64s(n, -1.0, 1.0).iter().map(|&x| x as f32).collect();
    let bias = Tensor::from_host(stream, &bias, &[n])?;
    let mut q = Tensor::<e4m3>::zeros(stream, &[m, n])?;
    let (mut amax, mut top) = (RowMaxPartials::new(), ColMaxPartials::new());
    let (mut rows, mut cols, mut all) = (Tensor::<f32>::zeros(stream, &[m])?, Tensor::<f32>::zeros(stream, &[n])?, Tensor::<f32>::zeros(stream, &[1])?);
    let mut detail = String::new();
    let unwritten = aux::row_maxes(stream, &amax, &mut rows).expect_err("unwritten partials must be refused");
    let mut pass = matches!(&unwritten, Error::Arg { name, .. } if name == "partials");
    detail += &format!("    before a launch: {unwritten}\n");
    fds::launch(stream, fds::Args { a: &a, b: &b, bias: &bias, q: &mut q, amax: &mut amax, top: &mut top, scale: 0.5 })?;
    aux::row_maxes(stream, &amax, &mut rows)?;
    aux::col_maxes(stream, &top, &mut cols)?;
    aux::max_of_all(stream, &amax, &mut all)?;
    // Host maxima over each output's tiles, from the `[tiles, padded]` partials.
    let host_max = |p: &Tensor<f32>, outs: usize| -> Result<Vec<f32>, Error> {
        let (d, v) = (p.shape().to_vec(), p.to_host()?);
        Ok((0..outs).map(|i| (0..d[0]).map(|t| v[t * d[1] + i]).fold(f32::NEG_INFINITY, f32::max)).collect())
    };
    let want_rows = host_max(amax.tensor().expect("written"), m)?;
    let want_cols = host_max(top.tensor().expect("written"), n)?;
    let want_all = want_rows.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for (what, got, want) in [("row_maxes", rows.to_host()?, want_rows), ("col_maxes", cols.to_host()?, want_cols), ("max_of_all", all.to_host()?, vec![want_all])] {
        let differing = got.iter().zip(&want).filter(|(g, w)| g.to_bits() != w.to_bits()).count();
        detail += &format!("    {what}: {differing} of {} differ from the host's maxima\n", want.len());
        pass &= differing == 0;
    }
    let mut short = Tensor::<f32>::zeros(stream, &[m - 1])?;
    for (what, err) in [
        ("row_maxes into [M − 1]", aux::row_maxes(stream, &amax, &mut short).expect_err("a short out must be refused")),
        ("max_of_all into [N]", aux::max_of_all(stream, &top, &mut cols).expect_err("max_of_all writes one value")),
    ] {
        pass &= matches!(&err, Error::Arg { name, .. } if name == "out");
        detail += &format!("    {what}: {err}\n");
    }
    Ok((pass, detail))
}

/// `aux::scale_into` against the host's `round(src · g)` bit for bit, for
/// each pair of element types, at lengths that leave a tail past the four
/// elements a thread takes, and on views one element in (not aligned for
/// four) on either side; its refusals, by name.
fn scale_into_exact(stream: &Stream) -> Result<(bool, String), Error> {
    use coda_runtime::{TensorView, TensorViewMut, aux};
    let mut rng = Rng::new(35);
    let g = Tensor::from_host(stream, &[-0.3f32], &[1])?;
    let mut detail = String::new();
    let mut pass = true;
    let mut check = |what: String, got: Vec<u32>, want: Vec<u32>| {
        let differing = got.iter().zip(&want).filter(|(a, b)| a != b).count() + got.len().abs_diff(want.len());
        detail += &format!("    {what}: {differing} of {} differ from the host's
", want.len());
        pass &= differing == 0;
    };
    for n in [1, 7, 4096 * 3 + 5, 1 << 20] {
        let xs: Vec<f32> = rng.f64s(n, -1e3, 1e3).iter().map(|&x| x as f32).collect();
        let src32 = Tensor::from_host(stream, &xs, &[n])?;
        let src16 = Tensor::from_host(stream, &xs.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>(), &[n])?;
        let want = |x: f32| x * -0.3f32;
        let (mut d32, mut d16) = (Tensor::<f32>::zeros(stream, &[n])?, Tensor::<bf16>::zeros(stream, &[n])?);
        aux::scale_into(stream, &src32, &g, &mut d16)?;
        check(format!("f32 → bf16, n = {n}"), d16.to_host()?.iter().map(|v| v.to_bits() as u32).collect(), xs.iter().map(|&x| bf16::from_f32(want(x)).to_bits() as u32).collect());
        aux::scale_into(stream, &src32, &g, &mut d32)?;
        check(format!("f32 → f32, n = {n}"), d32.to_host()?.iter().map(|v| v.to_bits()).collect(), xs.iter().map(|&x| want(x).to_bits()).collect());
        let x16: Vec<f32> = src16.to_host()?.iter().map(|v| v.to_f32()).collect();
        aux::scale_into(stream, &src16, &g, &mut d16)?;
        check(format!("bf16 → bf16, n = {n}"), d16.to_host()?.iter().map(|v| v.to_bits() as u32).collect(), x16.iter().map(|&x| bf16::from_f32(want(x)).to_bits() as u32).collect());
        aux::scale_into(stream, &src16, &g, &mut d32)?;
        check(format!("bf16 → f32, n = {n}"), d32.to_host()?.iter().map(|v| v.to_bits()).collect(), x16.iter().map(|&x| want(x).to_bits()).collect());
    }
    // Views one element in (f32 4-byte aligned, not 16; bf16 2-byte, not 8),
    // on either side or both: the kernel takes four at a time only where both are aligned.
    let n = 1001;
    let cs = stream.cuda();
    let xs: Vec<f32> = rng.f64s(n + 1, -1.0, 1.0).iter().map(|&x| x as f32).collect();
    let x16: Vec<bf16> = xs.iter().map(|&x| bf16::from_f32(x)).collect();
    for (from, to) in [(1, 1), (0, 1), (1, 0)] {
        let src = cs.clone_htod(&xs)?;
        let mut dst = cs.clone_htod(&vec![bf16::ZERO; n + 1])?;
        {
            let view = TensorView::new(src.slice(from..from + n), &[n])?;
            let mut out = TensorViewMut::new(dst.slice_mut(to..to + n), &[n])?;
            aux::scale_into(stream, &view, &g, &mut out)?;
        }
        let got: Vec<u32> = cs.clone_dtoh(&dst)?[to..to + n].iter().map(|v| v.to_bits() as u32).collect();
        let want = xs[from..from + n].iter().map(|&x| bf16::from_f32(x * -0.3).to_bits() as u32).collect();
        check(format!("f32 → bf16, src {from} and dst {to} elements in"), got, want);
        let src = cs.clone_htod(&x16)?;
        let mut dst = cs.clone_htod(&vec![0f32; n + 1])?;
        {
            let view = TensorView::new(src.slice(from..from + n), &[n])?;
            let mut out = TensorViewMut::new(dst.slice_mut(to..to + n), &[n])?;
            aux::scale_into(stream, &view, &g, &mut out)?;
        }
        let got: Vec<u32> = cs.clone_dtoh(&dst)?[to..to + n].iter().map(|v| v.to_bits()).collect();
        let want = x16[from..from + n].iter().map(|x| (x.to_f32() * -0.3).to_bits()).collect();
        check(format!("bf16 → f32, src {from} and dst {to} elements in"), got, want);
    }
    let (src, mut short, two) = (Tensor::<f32>::zeros(stream, &[8])?, Tensor::<bf16>::zeros(stream, &[7])?, Tensor::<f32>::zeros(stream, &[2])?);
    let mut i32s = Tensor::<i32>::zeros(stream, &[8])?;
    for (what, name, err) in [
        ("a [7] dst for an [8] src", "dst", aux::scale_into(stream, &src, &g, &mut short).expect_err("a short dst must be refused")),
        ("a [2] g", "g", aux::scale_into(stream, &src, &two, &mut Tensor::<f32>::zeros(stream, &[8])?).expect_err("g has one element")),
        ("an i32 dst", "dst", aux::scale_into(stream, &src, &g, &mut i32s).expect_err("i32 is not scaled")),
    ] {
        pass &= matches!(&err, Error::Arg { name: n, .. } if n == name);
        detail += &format!("    {what}: {err}\n");
    }
    Ok((pass, detail))
}

/// Memory and streams other libraries own (`Stream::from_cuda`, `from_raw`,
/// `TensorView`, `RawTensor`, DLPack export and import): a launch through each gives the same bits as
/// with the runtime's own tensors, also on the legacy default stream (a null
/// handle, PyTorch's default); bad borrowed memory is refused, naming the argument.
fn borrowed_memory_launches(stream: &Stream) -> Result<(bool, String), Error> {
    use coda_runtime::cudarc::driver::{CudaContext, DevicePtr, result};
    use coda_runtime::{RawTensor, TensorView, TensorViewMut};
    let (m, n, k) = (1000, 528, 264);
    let mut rng = Rng::new(33);
    let (ha, hb) = (rng.bf16s(m * k, -1.0, 1.0), rng.bf16s(n * k, -0.1, 0.1));
    let (a, b) = (Tensor::from_host(stream, &ha, &[m, k])?, Tensor::from_host(stream, &hb, &[n, k])?);
    let mut y = Tensor::<bf16>::zeros(stream, &[m, n])?;
    linear::launch(stream, linear::Args { a: &a, b: &b, y: &mut y })?;
    let want = y.to_host()?;
    let mut detail = String::new();
    let mut pass = true;
    let mut same = |what: &str, got: &[bf16]| {
        let differing = got.iter().zip(&want).filter(|(g, w)| g.to_bits() != w.to_bits()).count();
        detail += &format!("    {what}: {differing} elements differ from the owned tensors' launch\n");
        pass &= differing == 0;
    };

    // cudarc's own stream and slices, viewed.
    let cs = CudaContext::new(stream.ordinal())?.new_stream()?;
    let foreign = Stream::from_cuda(cs.clone())?;
    let (sa, sb) = (cs.clone_htod(&ha)?, cs.clone_htod(&hb)?);
    let mut sy = cs.clone_htod(&vec![bf16::from_bits(0xFFFF); m * n])?;
    {
        let (va, vb) = (TensorView::new(sa.as_view(), &[m, k])?, TensorView::new(sb.as_view(), &[n, k])?);
        let mut vy = TensorViewMut::new(sy.as_view_mut(), &[m, n])?;
        linear::launch(&foreign, linear::Args { a: &va, b: &vb, y: &mut vy })?;
    }
    same("cudarc views on a cudarc stream", &cs.clone_dtoh(&sy)?);

    // Raw addresses on a raw stream handle, then on the legacy default stream.
    let address = |s: &coda_runtime::cudarc::driver::CudaSlice<bf16>| s.device_ptr(&cs).0;
    let (pa, pb, py) = (address(&sa), address(&sb), address(&sy));
    cs.synchronize()?;
    // SAFETY: cs outlives both streams; null is the legacy default stream.
    let raw_streams = [("raw pointers on a raw stream handle", unsafe { Stream::from_raw(stream.ordinal(), cs.cu_stream()) }?), (
        "raw pointers on the legacy default stream (null handle)",
        unsafe { Stream::from_raw(stream.ordinal(), std::ptr::null_mut()) }?,
    )];
    for (what, s) in &raw_streams {
        // SAFETY: the slices outlive the tensors; nothing else uses them meanwhile (cs is idle).
        let (ra, rb, mut ry) = unsafe {
            (
                RawTensor::<bf16>::new(s, pa, &[m, k], &[k as isize, 1])?,
                RawTensor::<bf16>::new(s, pb, &[n, k], &[k as isize, 1])?,
                RawTensor::<bf16>::new(s, py, &[m, n], &[n as isize, 1])?,
            )
        };
        cs.memset_zeros(&mut sy)?;
        cs.synchronize()?;
        linear::launch(s, linear::Args { a: &ra, b: &rb, y: &mut ry })?;
        s.synchronize()?;
        same(what, &cs.clone_dtoh(&sy)?);
    }

    // DLPack: the runtime's tensors exported, then imported as launch arguments.
    let export = |host: &[bf16], shape: &[usize]| Tensor::from_host(stream, host, shape)?.into_dlpack();
    let (da, db, dy) = (export(&ha, &[m, k])?, export(&hb, &[n, k])?, export(&vec![bf16::from_bits(0xFFFF); m * n], &[m, n])?);
    {
        // SAFETY: the DLPack tensors outlive these; all their work is on `stream`.
        let (ia, ib, mut iy) = unsafe {
            (RawTensor::<bf16>::from_dlpack(stream, &da)?, RawTensor::<bf16>::from_dlpack(stream, &db)?, RawTensor::<bf16>::from_dlpack(stream, &dy)?)
        };
        linear::launch(stream, linear::Args { a: &ia, b: &ib, y: &mut iy })?;
    }
    stream.synchronize()?;
    let mut got = vec![bf16::ZERO; m * n];
    let y_address = dy.validate().map_err(|e| Error::arg("dy", e.to_string()))?.data_ptr() as u64;
    // SAFETY: dy holds m·n bf16 values; the launch writing them has finished.
    unsafe { result::memcpy_dtoh_sync(&mut got, y_address) }?;
    same("DLPack tensors exported and imported", &got);

    // Refusals, each naming its argument.
    let mut refused = |what: &str, arg: &str, r: Result<(), Error>| {
        let ok = matches!(&r, Err(Error::Arg { name, .. }) if name == arg);
        detail += &format!("    {what}: {}\n", r.err().map_or("not refused".into(), |e| e.to_string()));
        pass &= ok;
    };
    refused("a view of another length", "shape", TensorView::new(sa.as_view(), &[m, k + 1]).map(drop));
    let host_address = ha.as_ptr() as u64;
    // SAFETY: refused before use.
    refused("host memory", "address", unsafe { RawTensor::<bf16>::new(stream, host_address, &[m, k], &[k as isize, 1]) }.map(drop));
    refused("transposed strides", "strides", unsafe { RawTensor::<bf16>::new(stream, pa, &[m, k], &[1, m as isize]) }.map(drop));
    // An allocation of known extent (cuMemAlloc), 16 bytes too short.
    let bytes = m * k * 2;
    stream.cuda().context().bind_to_thread()?;
    // SAFETY: freed below; never launched on.
    let short = unsafe { result::malloc_sync(bytes - 16) }?;
    refused("a span past its allocation", "shape", unsafe { RawTensor::<bf16>::new(stream, short, &[m, k], &[k as isize, 1]) }.map(drop));
    // SAFETY: allocated above, unused.
    unsafe { result::free_sync(short) }?;
    // SAFETY: the handle is CU_STREAM_PER_THREAD, refused before use.
    refused("the per-thread default stream", "stream", unsafe { Stream::from_raw(0, std::ptr::without_provenance_mut(0x2)) }.map(drop));
    refused("cudarc's null stream", "stream", Stream::from_cuda(cs.context().default_stream()).map(drop));
    // SAFETY: refused before use.
    refused("a DLPack tensor of another dtype", "tensor", unsafe { RawTensor::<f32>::from_dlpack(stream, &da) }.map(drop));
    {
        let (va, vb) = (TensorView::new(sa.as_view(), &[m, k])?, TensorView::new(sb.as_view(), &[n, k])?);
        refused("views of another stream's slices", "a", linear::launch(stream, linear::Args { a: &va, b: &vb, y: &mut y }));
    }
    Ok((pass, detail))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `--sanitize`: every program, config and op once at small ragged shapes,
    // for compute-sanitizer (scripts/sanitize.sh); no stress, no 8192² case,
    // no deliberately refused TMA descriptor.
    let sanitize = args.iter().any(|a| a == "--sanitize");
    let quick = sanitize || args.iter().any(|a| a == "--quick");
    let values = |flag: &str| -> Vec<String> { args.windows(2).filter(|w| w[0] == flag).map(|w| w[1].clone()).collect() };
    let (only, skip) = (values("--only"), values("--skip"));
    let stress_seconds = if quick { 5.0 } else { 30.0 };
    // The ragged shape: M and N not multiples of any tile, K not of 64 (N/2 is a multiple of 8).
    let shapes: &[(usize, usize, usize)] = if sanitize {
        &[(300, 272, 136)]
    } else if quick {
        &[(1000, 528, 264)]
    } else {
        &[(4096, 4096, 4096), (1000, 528, 264)]
    };
    let ce: &[(usize, usize, usize)] = if sanitize {
        &[(300, 4000, 136)]
    } else if quick {
        &[(1000, 30000, 264)]
    } else {
        &[(4096, 32768, 4096), (1000, 30000, 264)]
    };
    // 16K tokens, and a ragged count (not a multiple of any tile).
    let blocks: &[usize] = if sanitize { &[300] } else if quick { &[1999] } else { &[16384, 15999] };
    // The backward at the same shapes (sampled rows and whole M-tiles), and
    // complete (every row, every weight gradient) at a small ragged shape.
    let small = block::config(256, 512);
    let large = block::config(2048, 8192);
    // The LM-head tail: (d, V, M, chunk rows, complete?, fused forward+backward?).
    let heads: &[(usize, usize, usize, usize, bool, bool)] = if sanitize {
        &[(256, 4096, 300, 256, true, false), (256, 4096, 300, 256, true, true)]
    } else if quick {
        &[(256, 4096, 1000, 256, true, false), (256, 4096, 1000, 256, true, true)]
    } else {
        &[
            (256, 4096, 1000, 256, true, false),
            (256, 4096, 1000, 256, true, true),
            (2048, 32768, 16384, 4096, false, false),
            (2048, 32768, 16384, 4096, false, true),
        ]
    };
    // Every program the default build compiles: this kit's and the Llama ops'.
    macro_rules! programs {
        ($($lib:ident :: $name:ident),* $(,)?) => {
            vec![$((concat!(stringify!($lib), "::", stringify!($name)), &$lib::$name::KERNEL, $lib::$name::program())),*]
        };
    }
    let programs: Vec<(&str, &coda_runtime::Kernel, coda_runtime::dsl::Program)> = programs![
        kit::gated_mix,
        kit::two_partials,
        kit::rowscale_rope,
        kit::dswiglu,
        kit::norm_weight_grad,
        kit::rank_one_stores,
        kit::linear,
        kit::swiglu,
        kit::math_functions,
        kit::math_activations,
        kit::lse_rows,
        kit::qk_norm_rope,
        kit::block_amax,
        kit::fp8_swiglu,
        kit::fp8_fast_swiglu,
        kit::fp8_residual_rms,
        kit::fp8_fast_residual_rms,
        kit::fp8_blockwise_swiglu,
        kit::fp8_requant,
        kit::fp8_delayed_scaling,
        kit::fp8_few_stages,
        kit::pair_head_norm,
        kit::map_stores,
        kit::map_pairs,
        kit::cpp_names,
        llama::linear_residual_rms_partial,
        llama::linear_rowscale_swiglu,
        llama::linear_rowscale_swiglu_save,
        llama::linear_rowscale_rope,
        llama::linear_cross_entropy,
        llama::rmsnorm_backward,
        llama::rmsnorm_backward_head,
        llama::rope_backward,
        llama::linear_dswiglu,
        llama::linear_cross_entropy_backward,
        llama::rms_input,
        llama::matmul,
        llama::linear_cross_entropy_save,
        llama::cross_entropy_grad,
        llama::weight_col_sums,
        llama::scaled_row_dot,
        llama::linear_cross_entropy_softcap,
        llama::linear_cross_entropy_backward_terms,
        llama::linear_cross_entropy_backward_softcap,
        llama::linear_cross_entropy_save_softcap,
        llama::cross_entropy_grad_terms,
        llama::cross_entropy_grad_softcap,
        llama::linear_rowscale_qk_norm_rope,
        llama::qk_norm_rope_backward,
    ];
    assert_eq!(programs.len(), coda_tests::programs::kernels().len() + coda_llama::programs::kernels().len(), "every program");
    // Each compiled config of each program at every shape (the program's own
    // with CUTLASS's scheduler defaults, the others with swizzle 8 along N),
    // and the own config with swizzle 8 along M at the ragged shape: both
    // pad the grid with tiles past (M, N).
    let ragged = *shapes.last().expect("a ragged shape");
    let mut generic = vec![];
    for (name, kernel, program) in &programs {
        // 8-bit operands need K in whole 16-byte rows: the ragged K rounded up to one (not to 128, a scale block).
        let shape = |(m, n, k): (usize, usize, usize)| if kernel.operands().is_fp8() { (m, n, k.next_multiple_of(16)) } else { (m, n, k) };
        let (shapes, ragged): (Vec<_>, _) = (shapes.iter().map(|&s| shape(s)).collect(), shape(ragged));
        for (i, v) in kernel.variants().iter().enumerate() {
            let choice = if i == 0 {
                Choice::own(kernel)
            } else {
                Choice { variant: i, config: v.config(), swizzle: 8, raster: Raster::AlongN }
            };
            generic.extend(shapes.iter().map(|&shape| (*name, *kernel, program, choice, shape)));
        }
        let swizzled = Choice { swizzle: 8, raster: Raster::AlongM, ..Choice::own(kernel) };
        generic.push((*name, *kernel, program, swizzled, ragged));
        // The FP8 mainloops promote once per 128 of K and branch on the count
        // of k-tiles: 1, 4 and 5 here, beside the ragged shape's 3 (2 with
        // --sanitize) and, in the full run, 4096's 32.
        if kernel.operands().is_fp8() {
            generic.extend([112, 496, 624].map(|k| (*name, *kernel, program, Choice::own(kernel), (ragged.0, ragged.1, k))));
        }
    }
    let mut run = Runner { stream: Stream::new(0), only, skip, outcomes: vec![], skipped: 0 };
    for (name, kernel, program, choice, (m, n, k)) in generic {
        run.case(format!("{name} [{}] M={m} N={n} K={k}", choice.describe()), |stream| {
            harness::verify(stream, kernel, program, Some(choice), (m, n, k), 7)
        });
    }
    // The shapes of random_000 of seed 0x5e330001 (one NaN of `acc / acc` on an H100), and its K around;
    // and with its very inputs (the same parameters in the same order, its seed 1000), where the
    // tensor cores' FP8 sum is 0 at element 8266 for an exact −2⁻¹⁸.
    for (m, n, k, seed) in [(1000, 528, 272, 8), (1000, 528, 144, 8), (1000, 528, 400, 8), (2100, 784, 528, 8), (1000, 528, 272, 1000)] {
        let program = kit::fp8_few_stages::program();
        run.case(format!("coda-tests::fp8_few_stages [own] M={m} N={n} K={k} seed {seed}"), |stream| {
            let kernel = &kit::fp8_few_stages::KERNEL;
            let (mut report, compared) = harness::verify_outputs(stream, kernel, &program, Some(Choice::own(kernel)), (m, n, k), seed, |_, _| Ok(()))?;
            // Where the accumulator is off (a relative 2^-6, well past bf16's
            // rounding), by column of the sampled rows: a pattern names the cause.
            let acc = compared.iter().find(|c| c.name == "v4").expect("v4 is an output");
            let off: Vec<usize> = (0..acc.ours.len())
                .filter(|&i| {
                    let d = (acc.ours[i] - acc.reference[i]).abs();
                    d.is_nan() || d > acc.reference[i].abs() / 64.0 + 1e-3
                })
                .collect();
            let shown: Vec<String> = off.iter().take(8).map(|&i| format!("({}, {})", i / n, i % n)).collect();
            report.asserts.push((format!("acc off at {} elements (sampled row, column): {}", off.len(), shown.join(" ")), off.is_empty()));
            // random_000's NaN was at element 8266 of these rows; where the
            // device's sum is 0, `acc / acc` is NaN (an informational line).
            let zeros = (0..acc.ours.len()).filter(|&i| acc.ours[i] == 0.0 && acc.reference[i] != 0.0).count();
            let at = acc.ours.get(8266).map_or(String::new(), |o| format!("; element 8266: ours {o:e}, f64 {:e}", acc.reference[8266]));
            report.asserts.push((format!("acc 0 where f64 is not at {zeros} elements{at}"), true));
            Ok(report)
        });
    }
    for &(m, v, k) in ce {
        run.case(format!("cross-entropy loss M={m} V={v} K={k}"), |stream| harness::cross_entropy_case(stream, m, v, k, 11, false));
    }
    let (big, big_name) = if sanitize { (&small, "d=256 ffn=512 heads 2x128 kv 1") } else { (&large, "d=2048 ffn=8192 heads 16x128 kv 4") };
    for &m in blocks {
        run.case(format!("block forward {big_name}, M={m}"), |stream| block::forward_case(stream, big, m, 128, 21));
    }
    for &m in blocks {
        run.case(format!("block backward {big_name}, M={m}"), |stream| backward::backward_case(stream, big, m, 32, 22, false, false));
    }
    run.case("block backward d=256 ffn=512 heads 2x128 kv 1, M=1000, every row and weight".into(), |stream| {
        backward::backward_case(stream, &small, 1000, 0, 23, true, false)
    });
    run.case("block backward d=256 ffn=512 heads 2x128 kv 1, M=1000, every row and weight, bf16 weight gradients".into(), |stream| {
        backward::backward_case(stream, &small, 1000, 0, 29, true, true)
    });
    // The same with QK-norm.
    let (big_qk, small_qk) = (BlockConfig { qk_norm: true, ..*big }, BlockConfig { qk_norm: true, ..small });
    for &m in blocks {
        run.case(format!("block forward, QK-norm, {big_name}, M={m}"), |stream| block::forward_case(stream, &big_qk, m, 128, 26));
        run.case(format!("block backward, QK-norm, {big_name}, M={m}"), |stream| backward::backward_case(stream, &big_qk, m, 32, 27, false, false));
    }
    run.case("block backward, QK-norm, d=256 ffn=512 heads 2x128 kv 1, M=1000, every row and weight".into(), |stream| {
        backward::backward_case(stream, &small_qk, 1000, 0, 28, true, false)
    });
    let how = |fused: bool| if fused { "head_forward_backward" } else { "head_forward + head_backward" };
    let rows = |full: bool| if full { "every row and weight" } else { "sampled rows" };
    for &(d, v, m, chunk, full, fused) in heads {
        run.case(format!("LM head {} d={d} V={v} M={m} chunks of {chunk}, {}", how(fused), rows(full)), |stream| {
            backward::head_case(stream, d, v, m, chunk, 96, 24, full, fused, HeadLoss::default())
        });
    }
    // The loss variants' programs, unfused and fused, each variant alone and
    // all three together, every row and weight; the full run also takes them
    // to a training shape with a ragged last chunk: soft-capping alone (its
    // own programs) and z-loss with label smoothing (the uncapped ones: the
    // terms, the weight's column sums).
    let small_variants = [
        ("soft-capped at 2", HeadLoss { softcap: Some(2.0), ..HeadLoss::default() }),
        ("z-loss 0.05", HeadLoss { z_loss: 0.05, ..HeadLoss::default() }),
        ("label smoothing 0.1", HeadLoss { label_smoothing: 0.1, ..HeadLoss::default() }),
        ("all three", HeadLoss { softcap: Some(2.0), z_loss: 0.05, label_smoothing: 0.1 }),
    ];
    let large_variants = [
        ("soft-capped at 30", HeadLoss { softcap: Some(30.0), ..HeadLoss::default() }),
        ("z-loss 1e-4 and label smoothing 0.1", HeadLoss { z_loss: 1e-4, label_smoothing: 0.1, ..HeadLoss::default() }),
    ];
    let small_m = if sanitize { 300 } else { 1000 };
    // (d, V, M, chunk rows, every row?, seed, variants)
    let mut variant_cases = vec![(256, 4096, small_m, 256, true, 25, &small_variants[..])];
    if !quick {
        variant_cases.push((2048, 32768, 15999, 4096, false, 30, &large_variants[..]));
    }
    for (d, v, m, chunk, full, seed, variants) in variant_cases {
        for &(what, loss) in variants {
            for fused in [false, true] {
                run.case(format!("LM head {}, {what}, d={d} V={v} M={m} chunks of {chunk}, {}", how(fused), rows(full)), |stream| {
                    backward::head_case(stream, d, v, m, chunk, 96, seed, full, fused, loss)
                });
            }
        }
    }
    run.outcome("launches per op (fused GEMM, aux, cuBLAS)".into(), |stream| {
        let counts = backward::launch_counts(stream)?;
        let detail: String = counts.iter().map(|(op, got, want)| format!("    {op:<26} {got:?} (expected {want:?})\n")).collect();
        let pass = counts.iter().all(|(_, got, want)| got == want);
        Ok((pass, detail))
    });
    run.case("math functions over wide ranges (errors against f64)".into(), |stream| edges::math_case(stream, false, 41));
    run.case("math functions on IEEE special values (NaN, ±inf, ±0, subnormals)".into(), |stream| edges::math_case(stream, true, 42));
    run.case("activations over wide ranges (errors against f64)".into(), |stream| edges::activations_case(stream, false, 43));
    run.case("activations on IEEE special values (NaN, ±inf, ±0, subnormals)".into(), |stream| edges::activations_case(stream, true, 45));
    run.case("row_lse and lse_from_partials on rows of -inf, ±1e4, one column, NaN, +inf, below -88, maxima up to ±f32::MAX".into(), |stream| edges::lse_case(stream, 44));
    run.case("cross-entropy loss with every target ignored (mean NaN)".into(), |stream| {
        let (m, v, k) = *ce.last().expect("a cross-entropy shape");
        harness::cross_entropy_case(stream, m, v, k, 45, true)
    });
    // Not under compute-sanitizer: the driver's refusal is this test's point,
    // and memcheck reports that API error.
    run.outcome_unless(sanitize, "a TMA descriptor the driver refuses is an error, nothing launched".into(), |stream| {
        tma_failure_is_an_error(stream)
    });
    run.outcome("bad K refused, nothing launched".into(), |stream| bad_input_launches_nothing(stream));
    run.outcome("public functions refuse bad input with errors naming the argument".into(), |stream| bad_inputs_are_errors(stream));
    let stress_name = format!("stress: 4 threads on one stream and 4 with a stream each, {stress_seconds} s");
    run.outcome_unless(sanitize, stress_name, |stream| {
        let o = stress::run(stream, 4, 4, stress_seconds);
        let mut detail = format!(
            "    {} threads, {} launches in {:.1} s, {} relaunches differing from their first run\n",
            o.threads, o.launches, o.seconds, o.mismatched_launches
        );
        for f in &o.failures {
            detail += &format!("    {f}\n");
        }
        Ok((o.pass(), detail))
    });
    run.outcome_unless(sanitize, "a second stream reading an output waits for the launch".into(), |stream| {
        other_streams_wait_for_launches(stream)
    });
    run.outcome("partials written by one program are refused to another".into(), |stream| partials_have_one_producer(stream));
    run.outcome("row_maxes, col_maxes and max_of_all finish row_max / col_max partials exactly".into(), |stream| maxima_finish(stream));
    run.outcome("scale_into scales by a device scalar as the host rounds it".into(), |stream| scale_into_exact(stream));
    // Not under compute-sanitizer: asking the driver about a host pointer is
    // the refusal's point, and the sanitizer reports that API error.
    run.outcome_unless(sanitize, "borrowed memory and streams (cudarc views, raw pointers, the legacy stream, DLPack)".into(), |stream| {
        borrowed_memory_launches(stream)
    });

    if let Err(e) = &run.stream {
        println!("gpu tests: SKIPPED, {e}. Their results come from runs on an H200 (see README).");
        println!("0 passed, 0 failed, {} skipped", run.skipped);
        return;
    }
    let outcomes = run.outcomes;
    let failed = outcomes.iter().filter(|o| !o.pass).count();
    println!("{} passed, {failed} failed", outcomes.len() - failed);
    for o in outcomes.iter().filter(|o| !o.pass) {
        println!("FAILED: {}", o.name);
    }
    if failed > 0 {
        std::process::exit(1);
    }
}
