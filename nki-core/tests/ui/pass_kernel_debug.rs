// `#[nki_kernel(debug)]` builds the same kernel (and prints its expansion while compiling); a
// generic kernel with an input, an output and a scalar parameter gets all four launchers.
use nki_core::prelude::*;

#[nki_kernel(debug)]
fn scale<T: Element>(a: &Hbm<T>, out: &mut Hbm<T>, factor: f32) {
    let i = nl::program_id(0) * 128;
    let x = nl::load(a.slice((i..i + 128, ..)));
    nl::store(out.slice((i..i + 128, ..)), &(&x * factor));
}

fn main() {
    let a = Hbm::<f32>::full([256, 64], 1.5);
    let mut out = Hbm::<f32>::zeros([256, 64]);
    scale::launch(2, &a, &mut out, 2.0).unwrap();
    assert!(out.to_f32_vec().unwrap().iter().all(|&v| v == 3.0));
    let p = scale::simulate(2, Target::Trn2, &a, &mut out, 2.0).unwrap();
    let e = scale::estimate(2, Target::Trn2, &a, &mut out, 2.0).unwrap();
    assert!(p.latency_ns > 0.0 && e.latency_ns > 0.0);
    scale::run(Launch::new(2).mode(Mode::Simulate), &a, &mut out, 2.0).unwrap();
}
