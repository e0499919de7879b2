"""RoBERTa for sequence classification in plain torch, layer for layer as transformers'
``RobertaForSequenceClassification`` (post-LayerNorm encoder, GELU, learned positions offset by
the padding index, a <s>-token head of dense+tanh+out_proj), randomly initialised like it
(normal 0.02). With VulBERTa's config (vocabulary 50 000, 1 026 positions, 12 layers of 768,
12 heads, one token type) it has 124 836 866 parameters, the count VulBERTa-MLP prints. Written
out instead of imported so the suite needs no transformers install and no download.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class RobertaConfig:
    vocab_size: int = 50000
    max_position_embeddings: int = 1026
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    type_vocab_size: int = 1
    dropout: float = 0.1
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 1
    num_labels: int = 2


class RobertaLayer(nn.Module):
    def __init__(self, c: RobertaConfig):
        super().__init__()
        self.heads, self.dropout = c.num_attention_heads, c.dropout
        self.query = nn.Linear(c.hidden_size, c.hidden_size)
        self.key = nn.Linear(c.hidden_size, c.hidden_size)
        self.value = nn.Linear(c.hidden_size, c.hidden_size)
        self.attn_out = nn.Linear(c.hidden_size, c.hidden_size)
        self.attn_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.intermediate = nn.Linear(c.hidden_size, c.intermediate_size)
        self.output = nn.Linear(c.intermediate_size, c.hidden_size)
        self.out_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def _split(self, x):
        n, length, width = x.shape
        return x.view(n, length, self.heads, width // self.heads).transpose(1, 2)

    def forward(self, x, key_mask):
        drop = self.dropout if self.training else 0.0
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask, dropout_p=drop)
        context = context.transpose(1, 2).reshape(x.shape)
        x = self.attn_norm(x + F.dropout(self.attn_out(context), drop, self.training))
        hidden = self.output(F.gelu(self.intermediate(x)))
        return self.out_norm(x + F.dropout(hidden, drop, self.training))


class RobertaForSequenceClassification(nn.Module):
    def __init__(self, c: RobertaConfig = RobertaConfig()):
        super().__init__()
        self.config = c
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size, padding_idx=c.pad_token_id)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.embed_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.layers = nn.ModuleList(RobertaLayer(c) for _ in range(c.num_hidden_layers))
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.out_proj = nn.Linear(c.hidden_size, c.num_labels)
        self.apply(self._init)

    def _init(self, m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)
            if m.padding_idx is not None:
                m.weight.data[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pad = self.config.pad_token_id
        not_pad = input_ids.ne(pad).long()
        positions = torch.cumsum(not_pad, dim=1) * not_pad + pad
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
             + self.token_type_embeddings(torch.zeros_like(input_ids)))
        x = F.dropout(self.embed_norm(x), self.config.dropout, self.training)
        key_mask = attention_mask.bool()[:, None, None, :]
        for layer in self.layers:
            x = layer(x, key_mask)
        head = F.dropout(x[:, 0], self.config.dropout, self.training)
        head = F.dropout(torch.tanh(self.dense(head)), self.config.dropout, self.training)
        return self.out_proj(head)
