"""The server side of the page: models shared by every visitor, each visitor's sessions, the limits
a deployment sets, every model call (in process or in a ZeroGPU worker), memory and the warm-up.
No tab's components: nothing here imports the rest of specviz.ui."""
