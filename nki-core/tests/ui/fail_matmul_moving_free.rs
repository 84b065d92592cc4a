use nki_core::prelude::*;
use nki_core::typed;

#[nki_kernel]
fn wide_moving(a: &Hbm<bf16>, b: &Hbm<bf16>, c: &mut Hbm<f32>) {
    let s: Sbuf<bf16, 128, 128> = Sbuf::load(a.view());
    let m: Sbuf<bf16, 128, 1024> = Sbuf::load(b.view());
    let out = typed::matmul(&s, &m); // N = 1024 > gemm_moving_fmax
    nl::store(c.view(), &out);
}

fn main() {
    let a = Hbm::<bf16>::zeros([128, 128]);
    let b = Hbm::<bf16>::zeros([128, 1024]);
    let mut c = Hbm::<f32>::zeros([128, 1024]);
    let _ = launch!(wide_moving[1](&a, &b, &mut c));
}
