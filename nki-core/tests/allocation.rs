//! Allocation and scheduling as NKI 0.8's `CompileConfig` documents them: where the
//! configuration comes from (the launch, the kernel's attribute, the dialect's default).

use nki_core::prelude::*;
use nki_core::{AllocationMode, CompileConfig, SchedulingHeuristic};

/// A kernel that names its own configuration, as `@nki.jit(compile_config=...)` does.
#[nki_kernel(compile_config = CompileConfig::default().linear(AllocationMode::Fast))]
fn configured(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    let t = nl::load(a.view());
    nl::store(out.view(), &t);
}

#[nki_kernel]
fn plain(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    let t = nl::load(a.view());
    nl::store(out.view(), &t);
}

fn estimate_launch() -> Launch {
    Launch::new([1]).mode(Mode::Estimate).target(Target::Trn2)
}

#[test]
fn the_launch_overrides_the_kernel_which_overrides_the_dialect_default() {
    let a = Hbm::<f32>::shape_only([128, 64]);
    let mut out = Hbm::<f32>::shape_only([128, 64]);
    let kernel_own = CompileConfig::default().linear(AllocationMode::Fast);
    let r = configured::run(estimate_launch(), &a, &mut out).unwrap();
    assert_eq!(r.compile_config, kernel_own);
    let asked = CompileConfig::default().scheduling(SchedulingHeuristic::Trivial);
    let r = configured::run(estimate_launch().compile_config(asked), &a, &mut out).unwrap();
    assert_eq!(r.compile_config, asked);
    let r = plain::run(estimate_launch(), &a, &mut out).unwrap();
    assert_eq!(
        r.compile_config,
        CompileConfig::for_dialect(nki_core::Dialect::Beta1)
    );
}
