"""A local server with TF Serving's REST API (`model_server.ModelServer`), its request and response
bodies (`rest_api`) and its batching of concurrent requests (`dynamic_batcher`), without
TensorFlow: what it serves is given to it (SavedModels by keras_bert_impl_export.serve, a
classifier's .tflite by `lite_servable`)."""
