#pragma once
// Kept for code written against the first API: nn::Model is nn::Model
// built from a list of layers. New code includes model.h.
#include "convoy/nn/model.h"
