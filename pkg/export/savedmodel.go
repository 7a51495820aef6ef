package export

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
)

// entrySavedModel is the entry's saved_model.pb: a SavedModel whose one meta graph holds, for each
// PS sub-graph i, a TfServingRemotePredict node with model_name "<model>:ps_<i>" and
// old_model_name "ps_<i>", the attributes the reference's entry graph gives them
// (distributed_ps.py). It computes nothing (the model is model.json and the dense file); agentctl
// decl reads the model name from it, as from a TensorFlow export.
func entrySavedModel(modelName string, numPS int) ([]byte, error) {
	graph := &tfframework.GraphDef{}
	for i := range numPS {
		sg := PSSubGraph(i)
		graph.Node = append(graph.Node, &tfframework.NodeDef{
			Name: sg + "/remote_predict",
			Op:   RemotePredictOp,
			Attr: map[string]*tfframework.AttrValue{
				"model_name":     {Value: &tfframework.AttrValue_S{S: []byte(modelName + ":" + sg)}},
				"old_model_name": {Value: &tfframework.AttrValue_S{S: []byte(sg)}},
			},
		})
	}
	sm := &tfprotobuf.SavedModel{SavedModelSchemaVersion: 1, MetaGraphs: []*tfprotobuf.MetaGraphDef{{GraphDef: graph}}}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(sm)
	if err != nil {
		return nil, fmt.Errorf("saved model: %w", err)
	}
	return data, nil
}
