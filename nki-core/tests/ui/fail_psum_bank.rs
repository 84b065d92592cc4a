use nki_core::prelude::*;

#[nki_kernel]
fn psum_over_one_bank(c: &mut Hbm<f32>) {
    // 1024 fp32 = 4 KiB per partition: two PSUM banks.
    let acc: Psum<f32, 128, 1024> = Psum::zeros();
    nl::store(c.view(), &acc);
}

fn main() {
    let mut c = Hbm::<f32>::zeros([128, 1024]);
    let _ = launch!(psum_over_one_bank[1](&mut c));
}
