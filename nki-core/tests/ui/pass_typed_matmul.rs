// Typed matmul at the TensorE limits (K = 128, M = 128, N = 512), with accumulation.
use nki_core::prelude::*;
use nki_core::typed;

#[nki_kernel]
fn mm(lhs_t: &Hbm<f32>, rhs: &Hbm<f32>, out: &mut Hbm<f32>) {
    // out[M, N] = sum over two K tiles of lhs_t[k, M]^T @ rhs[k, N]
    let acc: Psum<f32, 128, 512> = Psum::zeros();
    for k in nl::sequential_range(2) {
        let s: Sbuf<f32, 128, 128> = Sbuf::load(lhs_t.slice((k * 128..k * 128 + 128, ..)));
        let m: Sbuf<f32, 128, 512> = Sbuf::load(rhs.slice((k * 128..k * 128 + 128, ..)));
        typed::matmul_acc(&acc, &s, &m);
    }
    let single = {
        let s: Sbuf<f32, 128, 128> = Sbuf::load(lhs_t.slice((0..128, ..)));
        let m: Sbuf<f32, 128, 512> = Sbuf::load(rhs.slice((0..128, ..)));
        typed::matmul(&s, &m)
    };
    assert_eq!(single.shape(), &[128, 512]);
    let res: Sbuf<f32, 128, 512> = acc.to_sbuf();
    nl::store(out.view(), &res);
}

fn main() {
    let (k, m, n) = (256usize, 128usize, 512usize);
    let lv: Vec<f32> = (0..k * m).map(|x| ((x * 7) % 11) as f32 - 5.0).collect();
    let rv: Vec<f32> = (0..k * n).map(|x| ((x * 5) % 9) as f32 - 4.0).collect();
    let l = Hbm::<f32>::from_vec(&[k, m], lv.clone()).unwrap();
    let r = Hbm::<f32>::from_vec(&[k, n], rv.clone()).unwrap();
    let mut out = Hbm::<f32>::zeros([m, n]);
    launch!(mm[1](&l, &r, &mut out)).unwrap();
    let got = out.to_f32_vec().unwrap();
    for i in 0..m {
        for j in 0..n {
            let want: f32 = (0..k).map(|p| lv[p * m + i] * rv[p * n + j]).sum();
            assert_eq!(got[i * n + j], want, "out[{i}, {j}]");
        }
    }
}
