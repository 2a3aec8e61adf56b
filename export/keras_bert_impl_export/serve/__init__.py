"""The serving wing: `kbert serve`'s local stand-in for TF Serving. It loads what the export
wing wrote (`ServableModel`: one SavedModel version, TF Serving's "servable"), batches
concurrent requests (`DynamicBatcher`) and answers TF Serving's REST bodies (`rest_api`,
`ModelServer`). It reads exports from disk and imports nothing of the exporting modules."""
