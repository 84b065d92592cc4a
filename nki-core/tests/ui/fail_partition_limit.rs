use nki_core::prelude::*;

#[nki_kernel]
fn too_many_partitions(c: &mut Hbm<bf16>) {
    let t: Sbuf<bf16, 256, 512> = Sbuf::zeros();
    nl::store(c.view(), &t);
}

fn main() {
    let mut c = Hbm::<bf16>::zeros([256, 512]);
    let _ = launch!(too_many_partitions[1](&mut c));
}
