"""The pair advisor: which draft (or draft-free method) and which K, for this target, on these
prompts and this machine. It measures a survey, predicts from it with measure's model of speed,
writes the pick as each engine's own configuration, and checks it on the engines. May import
measure and what measure may."""
