//! Unit tests of the e-graph pass: the language, the rules' table, the cost and the report.
//! The rewrites themselves are shown by the lit-tests in `lit-tests/egraph/`.

use super::extract::MaterializedBytes;
use super::language::{Facts, Graph, Head, Node, Sig, SigId};
use super::*;
use crate::test_util::assert_module_valid;
use egg::{CostFunction, FromOp, Language};
use memc_ir::{parse_module, print_module, Opcode};

fn module(text: &str) -> Module {
    parse_module(text).unwrap_or_else(|d| panic!("test IR must parse: {d}"))
}

const INT4_MATMUL: &str = r#"
func.func @f(%arg0: tensor<4x64xf32>) -> tensor<4x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xi4>} : () -> tensor<64x32xi4>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<2x32xf32>} : () -> tensor<2x32xf32>
  %2 = "onnx.DequantizeLinear"(%0, %1) {axis = 0, block_size = 32} : (tensor<64x32xi4>, tensor<2x32xf32>) -> tensor<64x32xf32>
  %3 = "onnx.MatMul"(%arg0, %2) : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
  return %3 : tensor<4x32xf32>
}
"#;

#[test]
fn every_op_of_the_table_is_a_pattern_node() {
    for &opcode in Opcode::ALL {
        let node = Node::from_op(opcode.name(), Vec::new()).expect("table ops parse");
        assert_eq!(node.head, Head::Op(opcode));
        assert_eq!(node.to_string(), opcode.name());
    }
    assert!(Node::from_op("onnx.NoSuchOp", Vec::new()).is_err());
}

#[test]
fn patterns_match_any_signature_but_hash_consing_does_not() {
    let mut egraph = Graph::default();
    let ty = |elem| memc_ir::Type::from(memc_ir::TensorType::with_shape(elem, &[2]));
    let f32_sig = egraph.analysis.sigs.intern(Sig {
        attrs: memc_ir::AttrDict::new(),
        ty: ty(memc_ir::ElemType::F32),
    });
    let f16_sig = egraph.analysis.sigs.intern(Sig {
        attrs: memc_ir::AttrDict::new(),
        ty: ty(memc_ir::ElemType::F16),
    });
    let node = |sig| Node {
        head: Head::Op(Opcode::Relu),
        sig,
        children: Vec::new(),
    };
    let pattern = node(SigId::PATTERN);
    assert!(pattern.matches(&node(f32_sig)) && pattern.matches(&node(f16_sig)));
    let a = egraph.add(node(f32_sig));
    let b = egraph.add(node(f16_sig));
    assert_ne!(egraph.find(a), egraph.find(b));
}

#[test]
fn rule_names_are_unique() {
    let rules = rules::rules(&memc_ir::target::TargetInfo::GENERIC);
    let mut names: Vec<String> = rules.iter().map(|r| r.name.to_string()).collect();
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "{names:?}");
}

#[test]
fn the_fused_form_is_cheaper_by_the_float_weight() {
    let mut m = module(INT4_MATMUL);
    let id = m.func_ids()[0];
    let (egraph, built) = build(m.function_mut(id));
    let func = m.function(id);
    let runner = egg::Runner::<Node, Facts>::default()
        .with_egraph(egraph)
        .run(&rules::rules(&memc_ir::target::TargetInfo::GENERIC));
    let matmul = func.walk_ops()[3];
    let class = runner
        .egraph
        .find(built.class_of[&func.op(matmul).results[0]]);
    let mut cost = MaterializedBytes::new(&runner.egraph);
    let cost_of = |opcode: Opcode, cost: &mut MaterializedBytes| {
        let extractor = egg::Extractor::new(&runner.egraph, MaterializedBytes::new(&runner.egraph));
        let node = runner.egraph[class]
            .nodes
            .iter()
            .find(|n| n.head == Head::Op(opcode))
            .expect("both forms are in the class")
            .clone();
        cost.cost(&node, |c| extractor.find_best_cost(c))
    };
    let unfused = cost_of(Opcode::MatMul, &mut cost);
    let fused = cost_of(Opcode::MatMulNBits, &mut cost);
    // The DQ's float output is 64 * 32 * 4 bytes, and it is one op more.
    assert_eq!(unfused - fused, f64::from(64 * 32 * 4 + 1));
}

#[test]
fn a_function_no_rule_changes_is_left_as_it_was() {
    let text = r#"
func.func @f(%arg0: tensor<4x64xf32>, %arg1: tensor<64x32xf32>) -> tensor<4x32xf32> {
  %0 = "onnx.Relu"(%arg0) : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %1 = "onnx.Relu"(%arg0) : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %2 = "onnx.Add"(%0, %1) : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %3 = "onnx.MatMul"(%2, %arg1) : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
  return %3 : tensor<4x32xf32>
}
"#;
    let mut m = module(text);
    let before = print_module(&m);
    Egraph::new().run(&mut m).expect("the pass does not fail");
    // Even the two equal Relus stay: nothing fused, so nothing is rebuilt.
    assert_eq!(print_module(&m), before);
}

#[test]
fn the_report_says_why_saturation_stopped() {
    let mut m = module(INT4_MATMUL);
    let pass = Egraph::new();
    pass.run(&mut m).expect("the pass does not fail");
    assert_module_valid(&m, "after egraph");
    let note = pass.timing_note().expect("egraph reports its saturation");
    assert!(
        note.starts_with("egraph: stopped: saturated after 2 iterations;"),
        "{note}"
    );
    assert!(note.ends_with("rules applied: dq-matmul x1"), "{note}");
    let printed = print_module(&m);
    assert!(printed.contains("memc.matmul_nbits"), "{printed}");
    assert!(!printed.contains("onnx.DequantizeLinear"), "{printed}");
}

#[test]
fn stop_reasons_read_as_words() {
    use egg::StopReason;
    assert_eq!(stop_reason(Some(&StopReason::Saturated)), "saturated");
    assert_eq!(
        stop_reason(Some(&StopReason::IterationLimit(16))),
        "iteration limit (16)"
    );
    assert_eq!(
        stop_reason(Some(&StopReason::NodeLimit(10))),
        "node limit (10)"
    );
    assert_eq!(
        stop_reason(Some(&StopReason::TimeLimit(5.0))),
        "time limit (5 s)"
    );
}

/// A residual chain of `layers` layers, each `x + MatMul(x * x, DQ(w_i))`: every layer's `x`
/// has three uses, so a tree cost that counts shared values once per path grows 3^layers.
fn residual_chain(layers: usize) -> String {
    let mut text = String::from("func.func @f(%arg0: tensor<4x64xf32>) -> tensor<4x64xf32> {\n");
    let mut x = "%arg0".to_string();
    for i in 0..layers {
        text += &format!(
            "  %w{i} = \"memc.weight\"() {{value = dense_resource<\"w{i}\"> : tensor<64x64xi4>}} : () -> tensor<64x64xi4>\n\
             \x20 %s{i} = \"memc.weight\"() {{value = dense_resource<\"s{i}\"> : tensor<2x64xf32>}} : () -> tensor<2x64xf32>\n\
             \x20 %d{i} = \"onnx.DequantizeLinear\"(%w{i}, %s{i}) {{axis = 0, block_size = 32}} : (tensor<64x64xi4>, tensor<2x64xf32>) -> tensor<64x64xf32>\n\
             \x20 %h{i} = \"onnx.Mul\"({x}, {x}) : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>\n\
             \x20 %y{i} = \"onnx.MatMul\"(%h{i}, %d{i}) : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>\n\
             \x20 %x{i} = \"onnx.Add\"({x}, %y{i}) : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>\n"
        );
        x = format!("%x{i}");
    }
    text += &format!("  return {x} : tensor<4x64xf32>\n}}\n");
    text
}

#[test]
fn every_layer_of_a_deep_residual_chain_fuses() {
    let layers = 64;
    let mut m = module(&residual_chain(layers));
    Egraph::new().run(&mut m).expect("the pass does not fail");
    assert_module_valid(&m, "after egraph");
    let printed = print_module(&m);
    assert_eq!(
        printed.matches("memc.matmul_nbits").count(),
        layers,
        "{printed}"
    );
    assert!(!printed.contains("onnx.DequantizeLinear"), "{printed}");
}
