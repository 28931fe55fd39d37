%% JSON for docket_progressor: Erlang terms to and from docket's JSON.
%%
%% progressor's opaque values (args, context, payloads, aux_state, responses) are Erlang
%% binaries, usually term_to_binary output that is not UTF-8. JSON has no bytes, so every
%% binary travels as {"$bin": "<base64>"} and comes back as the same binary; docket's Kafka
%% sink reads the same convention. Metadata is JSON in progressor too (jsx), so it travels as
%% plain JSON: binaries there are strings.
-module(docket_progressor_json).

-export([encode/1, decode/1]).
-export([to_json/1, from_json/1, metadata/1]).
-export([to_seconds/1, to_rfc3339/1]).

-spec encode(term()) -> binary().
encode(Json) ->
    jiffy:encode(Json).

-spec decode(binary()) -> term().
decode(Bin) ->
    jiffy:decode(Bin, [return_maps]).

%% Throws {not_encodable, Term} for what JSON cannot hold (tuples, pids, ...): guessing an
%% encoding for those would hand the reader something it cannot decode.
-spec to_json(term()) -> term().
to_json(B) when is_binary(B) ->
    #{<<"$bin">> => base64:encode(B)};
to_json(M) when is_map(M) ->
    maps:fold(fun(K, V, Acc) -> Acc#{key(K) => to_json(V)} end, #{}, M);
to_json(L) when is_list(L) ->
    [to_json(X) || X <- proper(L)];
to_json(N) when is_number(N) ->
    N;
%% true, false and null are JSON literals; other atoms become strings (and come back binaries).
to_json(A) when is_atom(A) ->
    A;
to_json(T) ->
    throw({not_encodable, T}).

-spec from_json(term()) -> term().
from_json(#{<<"$bin">> := B64} = M) when map_size(M) =:= 1, is_binary(B64) ->
    try
        base64:decode(B64)
    catch
        _:_ -> M
    end;
from_json(M) when is_map(M) ->
    maps:map(fun(_, V) -> from_json(V) end, M);
from_json(L) when is_list(L) ->
    [from_json(X) || X <- L];
from_json(X) ->
    X.

%% Metadata as plain JSON; only checked, so an unencodable term fails here, not in jiffy.
-spec metadata(term()) -> term().
metadata(M) when is_map(M) ->
    maps:fold(fun(K, V, Acc) -> Acc#{key(K) => metadata(V)} end, #{}, M);
metadata(L) when is_list(L) ->
    [metadata(X) || X <- proper(L)];
metadata(X) when is_binary(X); is_number(X); is_atom(X) ->
    X;
metadata(T) ->
    throw({not_encodable, T}).

key(K) when is_binary(K) -> K;
key(K) when is_atom(K) -> atom_to_binary(K, utf8);
key(K) when is_integer(K) -> integer_to_binary(K);
key(K) -> throw({not_encodable, K}).

proper(L) ->
    try length(L) of
        _ -> L
    catch
        error:badarg -> throw({not_encodable, L})
    end.

%% progressor's times are Unix seconds; docket's are RFC 3339 (sub-second parts dropped).
-spec to_seconds(binary() | null) -> integer() | undefined.
to_seconds(null) ->
    undefined;
to_seconds(T) when is_binary(T) ->
    calendar:rfc3339_to_system_time(binary_to_list(T), [{unit, second}]).

-spec to_rfc3339(integer()) -> binary().
to_rfc3339(Seconds) when is_integer(Seconds) ->
    list_to_binary(calendar:system_time_to_rfc3339(Seconds, [{unit, second}, {offset, "Z"}])).
