use nki_core::prelude::*;
use nki_core::typed;

#[nki_kernel]
fn contraction_mismatch(a: &Hbm<bf16>, b: &Hbm<bf16>, c: &mut Hbm<f32>) {
    let s: Sbuf<bf16, 128, 128> = Sbuf::load(a.view());
    let m: Sbuf<bf16, 64, 512> = Sbuf::load(b.view());
    let out = typed::matmul(&s, &m); // K = 128 vs 64
    nl::store(c.view(), &out);
}

fn main() {
    let a = Hbm::<bf16>::zeros([128, 128]);
    let b = Hbm::<bf16>::zeros([64, 512]);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    let _ = launch!(contraction_mismatch[1](&a, &b, &mut c));
}
