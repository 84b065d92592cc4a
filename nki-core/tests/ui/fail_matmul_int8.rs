use nki_core::prelude::*;
use nki_core::typed;

#[nki_kernel]
fn int_matmul(a: &Hbm<i8>, b: &Hbm<i8>, c: &mut Hbm<f32>) {
    let s: Sbuf<i8, 128, 128> = Sbuf::load(a.view());
    let m: Sbuf<i8, 128, 512> = Sbuf::load(b.view());
    let out = typed::matmul(&s, &m); // TensorE takes float operands only
    nl::store(c.view(), &out);
}

fn main() {
    let a = Hbm::<i8>::zeros([128, 128]);
    let b = Hbm::<i8>::zeros([128, 512]);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    let _ = launch!(int_matmul[1](&a, &b, &mut c));
}
