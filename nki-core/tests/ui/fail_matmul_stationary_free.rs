use nki_core::prelude::*;
use nki_core::typed;

#[nki_kernel]
fn wide_stationary(a: &Hbm<bf16>, b: &Hbm<bf16>, c: &mut Hbm<f32>) {
    let s: Sbuf<bf16, 128, 256> = Sbuf::load(a.view());
    let m: Sbuf<bf16, 128, 512> = Sbuf::load(b.view());
    let out = typed::matmul(&s, &m); // M = 256 > gemm_stationary_fmax
    nl::store(c.view(), &out);
}

fn main() {
    let a = Hbm::<bf16>::zeros([128, 256]);
    let b = Hbm::<bf16>::zeros([128, 512]);
    let mut c = Hbm::<f32>::zeros([256, 512]);
    let _ = launch!(wide_stationary[1](&a, &b, &mut c));
}
