//! The in-process judgement (docs/src/embeddings.md): all-MiniLM-L6-v2 run by candle on
//! the paraphrase test; prints load and embed times, the cosines, peak RSS.
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use std::time::Instant;

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmHWM"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

fn main() {
    let dir = std::env::args().nth(1).expect("model dir");
    let start = Instant::now();
    let device = Device::Cpu;
    let config: Config =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/config.json")).unwrap())
            .unwrap();
    let mut tokenizer = tokenizers::Tokenizer::from_file(format!("{dir}/tokenizer.json")).unwrap();
    tokenizer.with_padding(Some(tokenizers::PaddingParams::default()));
    let vb = unsafe {
        VarBuilder::from_mmaped_safetensors(
            &[format!("{dir}/model.safetensors")],
            DType::F32,
            &device,
        )
        .unwrap()
    };
    let model = BertModel::load(vb, &config).unwrap();
    eprintln!("load {:?}", start.elapsed());
    let texts = [
        "how did I speed up the database last time?",
        "made the Postgres queries faster with a covering index",
        "fixed the login page CSS so the button is centred",
        "wrote release notes for version 2.3 of the mobile app",
        "planned the team offsite agenda and booked the venue",
        "debugged a flaky unit test in the payment service caused by time zones",
        "refactored the React component tree to remove prop drilling",
        "chose a colour palette for the marketing site",
    ];
    let start = Instant::now();
    let enc = tokenizer.encode_batch(texts.to_vec(), true).unwrap();
    let ids: Vec<Tensor> = enc
        .iter()
        .map(|e| Tensor::new(e.get_ids(), &device).unwrap())
        .collect();
    let mask: Vec<Tensor> = enc
        .iter()
        .map(|e| Tensor::new(e.get_attention_mask(), &device).unwrap())
        .collect();
    let ids = Tensor::stack(&ids, 0).unwrap();
    let mask = Tensor::stack(&mask, 0).unwrap();
    let types = ids.zeros_like().unwrap();
    let out = model.forward(&ids, &types, Some(&mask)).unwrap();
    let m = mask.to_dtype(DType::F32).unwrap().unsqueeze(2).unwrap();
    let sum = out.broadcast_mul(&m).unwrap().sum(1).unwrap();
    let pooled = sum.broadcast_div(&m.sum(1).unwrap()).unwrap();
    let norm = pooled
        .sqr()
        .unwrap()
        .sum_keepdim(1)
        .unwrap()
        .sqrt()
        .unwrap();
    let v: Vec<Vec<f32>> = pooled.broadcast_div(&norm).unwrap().to_vec2().unwrap();
    eprintln!("embed 8 texts {:?}", start.elapsed());
    for (i, t) in texts.iter().enumerate().skip(1) {
        let s: f32 = v[0].iter().zip(&v[i]).map(|(a, b)| a * b).sum();
        println!("{s:.3}  {t}");
    }
    eprintln!("peak RSS {} KiB", rss_kib());
}
