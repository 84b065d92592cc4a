use nki_core::prelude::*;

#[nki_kernel]
fn add_mismatched(a: &Hbm<f32>, b: &Hbm<f32>, c: &mut Hbm<f32>) {
    let x: Sbuf<f32, 128, 512> = Sbuf::load(a.view());
    let y: Sbuf<f32, 64, 512> = Sbuf::load(b.view());
    let z = &x + &y;
    nl::store(c.view(), &z);
}

fn main() {
    let a = Hbm::<f32>::zeros([128, 512]);
    let b = Hbm::<f32>::zeros([64, 512]);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    let _ = launch!(add_mismatched[1](&a, &b, &mut c));
}
