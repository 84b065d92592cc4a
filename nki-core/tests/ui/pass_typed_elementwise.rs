// Typed tiles of the largest legal shapes build and compute the right values.
use nki_core::prelude::*;

#[nki_kernel]
fn arith(a: &Hbm<f32>, b: &Hbm<f32>, sum: &mut Hbm<f32>, prod: &mut Hbm<f32>, quot: &mut Hbm<f32>) {
    let i = nl::program_id(0) * 128;
    let x: Sbuf<f32, 128, 512> = Sbuf::load(a.slice((i..i + 128, ..)));
    let y: Sbuf<f32, 128, 512> = Sbuf::load(b.slice((i..i + 128, ..)));
    let s = &x + &y;
    let d = &s - &y; // == x
    let p = x * d; // owned operands: x * x
    nl::store(sum.slice((i..i + 128, ..)), &s);
    nl::store(prod.slice((i..i + 128, ..)), &p);
    nl::store(quot.slice((i..i + 128, ..)), &(&p / &y));
    // Scalars go through the untyped tile (NKI operators, checked at run time).
    let twice = &*s * 2.0;
    assert_eq!(twice.shape(), &[128, 512]);
    // The edges of the PSUM limit are legal: 512 fp32 or 1024 bf16 per partition.
    let _bank_f32: Psum<f32, 128, 512> = Psum::zeros();
    let _bank_bf16: Psum<bf16, 128, 1024> = Psum::zeros();
    // A run-time tile of the right shape can be given the type.
    let t: Sbuf<f32, 128, 512> = Sbuf::from_tile(nl::zeros(&[128, 512], DType::F32, nl::SBUF));
    assert_eq!(t.shape(), &[128, 512]);
}

fn main() {
    let (rows, cols) = (256usize, 512usize);
    let av: Vec<f32> = (0..rows * cols).map(|k| (k % 97) as f32 - 40.0).collect();
    let bv: Vec<f32> = (0..rows * cols).map(|k| (k % 13) as f32 + 1.0).collect();
    let a = Hbm::<f32>::from_vec(&[rows, cols], av.clone()).unwrap();
    let b = Hbm::<f32>::from_vec(&[rows, cols], bv.clone()).unwrap();
    let mut sum = Hbm::<f32>::zeros([rows, cols]);
    let mut prod = Hbm::<f32>::zeros([rows, cols]);
    let mut quot = Hbm::<f32>::zeros([rows, cols]);
    launch!(arith[2](&a, &b, &mut sum, &mut prod, &mut quot)).unwrap();
    let (s, p, q) = (
        sum.to_f32_vec().unwrap(),
        prod.to_f32_vec().unwrap(),
        quot.to_f32_vec().unwrap(),
    );
    for k in 0..rows * cols {
        assert_eq!(s[k], av[k] + bv[k]);
        assert_eq!(p[k], av[k] * av[k]);
        assert_eq!(q[k], av[k] * av[k] / bv[k]);
    }
}
