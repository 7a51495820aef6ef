ûø

featuresPlaceholder
o
remote_predict_0TfServingRemotePredict*
max_rpc_deadline_millis¸*#

model_nametest_ffm_model:ps_0
l
remote_predict_1TfServingRemotePredict*
max_rpc_deadline_millis¸* 

model_nameother_model:ps_1