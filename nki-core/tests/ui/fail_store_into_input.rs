use nki_core::prelude::*;

#[nki_kernel]
fn store_into_input(a: &Hbm<f32>, c: &mut Hbm<f32>) {
    let x = nl::load(a.slice((0..128, 0..512)));
    nl::store(a.slice((0..128, 0..512)), &x); // `a` is an input
    nl::store(c.slice((0..128, 0..512)), &x);
}

fn main() {
    let a = Hbm::<f32>::zeros([128, 512]);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    let _ = launch!(store_into_input[1](&a, &mut c));
}
