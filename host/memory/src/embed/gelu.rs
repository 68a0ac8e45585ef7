//! GELU in its erf form over f32 on the CPU, with erf as a rational
//! function a compiler vectorises (issue 49: candle's `gelu_erf` calls
//! `libm::erff` per element, a branchy function that `perf` put at 18 % of
//! an import). The approximation is Eigen's `generic_fast_erf_float`
//! (inputs clamped to [-4, 4], where erf is ±1 in f32; an odd polynomial
//! of degree 13 over an even one of degree 8), within a few units in the
//! last place of f32 of erf; `tests::matches_candles_gelu_erf` checks it
//! against candle's.

use candle_core::{CpuStorage, CustomOp1, DType, Device, Layout, Result, Shape, Tensor};

/// erf of `x`, for f32 (see the module's documentation).
#[inline(always)]
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_4e-10 + 2.770_681_5e-8;
    p = x2 * p - 2.101_024e-6;
    p = x2 * p - 5.692_506_2e-5;
    p = x2 * p - 7.349_906_4e-4;
    p = x2 * p - 2.954_6e-3;
    p = x2 * p - 1.609_603_3e-2;
    let p = x * p;
    let mut q = x2 * -1.456_607_15e-5 - 2.133_740_5e-4;
    q = x2 * q - 1.682_827e-3;
    q = x2 * q - 7.373_329_3e-3;
    q = x2 * q - 1.426_473_9e-2;
    p / q
}

struct GeluErf;

impl CustomOp1 for GeluErf {
    fn name(&self) -> &'static str {
        "capsaga-gelu-erf"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(v), Some((start, end))) = (storage, layout.contiguous_offsets())
        else {
            return Err(candle_core::Error::Msg(
                "capsaga-gelu-erf: a contiguous f32 tensor".into(),
            ));
        };
        let out: Vec<f32> = v[start..end]
            .iter()
            .map(|&x| 0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2)))
            .collect();
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

/// GELU (erf form) of `x`: this module's for an f32 tensor on the CPU,
/// candle's otherwise.
///
/// # Errors
/// candle's, on a tensor it cannot make contiguous.
pub(crate) fn gelu_erf(x: &Tensor) -> Result<Tensor> {
    if x.dtype() == DType::F32 && matches!(x.device(), Device::Cpu) {
        x.contiguous()?.apply_op1_no_bwd(&GeluErf)
    } else {
        x.gelu_erf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_candles_gelu_erf() {
        let xs: Vec<f32> = (-4000..=4000).map(|i| i as f32 / 500.0).collect();
        let t = Tensor::new(xs.as_slice(), &Device::Cpu).unwrap();
        let ours: Vec<f32> = gelu_erf(&t).unwrap().to_vec1().unwrap();
        let theirs: Vec<f32> = t.gelu_erf().unwrap().to_vec1().unwrap();
        let worst = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst < 2e-6, "largest difference {worst}");
        // Not contiguous (a transposed matrix): made so, the same values.
        let m = Tensor::new(&[[-1.0f32, 0.5], [2.0, -3.0]], &Device::Cpu)
            .unwrap()
            .t()
            .unwrap();
        let a: Vec<Vec<f32>> = gelu_erf(&m).unwrap().to_vec2().unwrap();
        let b: Vec<Vec<f32>> = m.gelu_erf().unwrap().to_vec2().unwrap();
        for (x, y) in a.iter().flatten().zip(b.iter().flatten()) {
            assert!((x - y).abs() < 2e-6);
        }
    }
}
