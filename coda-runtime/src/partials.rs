//! Per-tile partial statistics (`row_sum`, `col_sum`, `row_max`, `col_max`,
//! `row_lse` outputs) as typed objects that the library allocates.
//!
//! Their layout depends on the tile of the config a launch runs, which the
//! tuner picks at run time; so the user never sizes them. A launch binds the
//! object to its program, config and GEMM shape (allocating on first use or
//! when the shape changes), and the aux finishers read that record back. An
//! object belongs to the first program that writes it: another program
//! writing it is refused, so two producers can never share one by accident.

use std::marker::PhantomData;

use crate::dsl::ir::{Config, Shape};
use crate::kernel::{Choice, Kernel, Problem};
use crate::{Error, Stream, Tensor, TensorMut};

/// Which statistic a [`Partials`] holds; fixes its layout.
pub trait Kind: sealed::Sealed {
    const SHAPE: Shape;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Row {}
    impl Sealed for super::Col {}
    impl Sealed for super::Lse {}
    impl Sealed for super::RowMax {}
    impl Sealed for super::ColMax {}
}

/// Row sums per N-tile: `[ceil(N / tile_n), round_up(M, tile_m)]`.
#[derive(Debug)]
pub struct Row;
/// Column sums per M-tile: `[ceil(M / tile_m), round_up(N, tile_n)]`.
#[derive(Debug)]
pub struct Col;
/// Online log-sum-exp per row and N-tile: `[2, ceil(N / tile_n), round_up(M, tile_m)]`.
#[derive(Debug)]
pub struct Lse;
/// Row maxima per N-tile, laid out as [`Row`].
#[derive(Debug)]
pub struct RowMax;
/// Column maxima per M-tile, laid out as [`Col`].
#[derive(Debug)]
pub struct ColMax;

/// The kinds that hold maxima, which [`crate::aux::max_of_all`] finishes.
pub trait Maxima: Kind {}
impl Maxima for RowMax {}
impl Maxima for ColMax {}

impl Kind for Row {
    const SHAPE: Shape = Shape::RowPartial;
}
impl Kind for Col {
    const SHAPE: Shape = Shape::ColPartial;
}
impl Kind for Lse {
    const SHAPE: Shape = Shape::LsePartial;
}
impl Kind for RowMax {
    const SHAPE: Shape = Shape::RowMaxPartial;
}
impl Kind for ColMax {
    const SHAPE: Shape = Shape::ColMaxPartial;
}

/// `row_sum` outputs.
pub type RowPartials = Partials<Row>;
/// `col_sum` outputs.
pub type ColPartials = Partials<Col>;
/// `row_lse` outputs.
pub type LsePartials = Partials<Lse>;
/// `row_max` outputs.
pub type RowMaxPartials = Partials<RowMax>;
/// `col_max` outputs.
pub type ColMaxPartials = Partials<ColMax>;

/// The launch that last wrote a [`Partials`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Producer {
    /// The program's kernel name (`crate::program`).
    pub program: &'static str,
    pub config: Config,
    /// The GEMM's output shape.
    pub m: usize,
    pub n: usize,
}

/// Partial statistics written by one program (see the module docs).
#[derive(Debug)]
pub struct Partials<K: Kind> {
    buf: Option<Tensor<f32>>,
    producer: Option<Producer>,
    kind: PhantomData<K>,
}

impl<K: Kind> Default for Partials<K> {
    fn default() -> Self {
        Partials { buf: None, producer: None, kind: PhantomData }
    }
}

impl<K: Kind> Partials<K> {
    /// Empty: the first launch that writes it allocates it.
    pub fn new() -> Self {
        Self::default()
    }

    /// The launch that wrote it last, if any.
    pub fn producer(&self) -> Option<&Producer> {
        self.producer.as_ref()
    }

    /// The tile-major values (for reading them back; see the kind's layout).
    pub fn tensor(&self) -> Option<&Tensor<f32>> {
        self.buf.as_ref()
    }

    /// Fills the values with NaN (before a checked run).
    pub fn poison(&mut self) -> Result<(), Error> {
        self.buf.as_mut().map_or(Ok(()), |b| b.poison())
    }

    /// The buffer a launch of `kernel` in `choice` at `prob` writes:
    /// allocated when absent, on another stream or of other dims (then it
    /// holds nothing until [`Partials::record`]); refused when another
    /// program wrote it, and before allocating, for a `choice` the launch
    /// would refuse (not a compiled variant, a bad swizzle) or dims that
    /// overflow ([`Error::Arg`]). Not the tensor itself, so it cannot be replaced.
    #[doc(hidden)]
    pub fn bind(&mut self, name: &str, stream: &Stream, kernel: &Kernel, choice: &Choice, prob: Problem) -> Result<&mut dyn TensorMut<f32>, Error> {
        if let Some(p) = self.producer.filter(|p| p.program != kernel.name()) {
            return Err(Error::arg(
                name,
                format!(
                    "holds the partials of `{}`; `{}` needs its own (one Partials per producing program)",
                    p.program,
                    kernel.name()
                ),
            ));
        }
        kernel.variant(choice)?;
        let dims = Choice::dims_for(&choice.config, K::SHAPE, prob.m, prob.n)?;
        let fits = |b: &Tensor<f32>| b.shape() == dims.as_slice() && crate::AnyTensor::on_stream(b, stream);
        if !self.buf.as_ref().is_some_and(fits) {
            self.producer = None;
            self.buf = Some(Tensor::zeros(stream, &dims)?);
        }
        Ok(self.buf.as_mut().expect("allocated above"))
    }

    /// Records the launch that wrote the buffer [`Partials::bind`] gave, once it is enqueued.
    #[doc(hidden)]
    pub fn record(&mut self, kernel: &Kernel, choice: &Choice, prob: Problem) {
        self.producer = Some(Producer { program: kernel.name(), config: choice.config, m: prob.m, n: prob.n });
    }

    /// The buffer and its producer, for a finisher reading `name`.
    pub(crate) fn written(&self, name: &str) -> Result<(&Tensor<f32>, &Producer), Error> {
        match (&self.buf, &self.producer) {
            // `bind` keeps the two in step; checked again because finishers index by them.
            (Some(b), Some(p)) if Choice::dims_for(&p.config, K::SHAPE, p.m, p.n).is_ok_and(|d| b.shape() == d.as_slice()) => Ok((b, p)),
            _ => Err(Error::arg(name, "holds no partials yet: launch the program that writes them first")),
        }
    }
}
